#include "search_graph.hpp"

#include <algorithm>

#include "chimera/core/error.hpp"

namespace chimera::schedule::detail {

namespace {

// Which op holds (class, pipe, stage, micro-batch); class 0 = F, 1 = B or I, 2 = W.
struct OpIndex {
  int pipes, stages, mbs;
  std::vector<int> id;
  OpIndex(int p, int s, int m)
      : pipes(p), stages(s), mbs(m), id(static_cast<std::size_t>(3) * p * s * m, -1) {}
  int& at(int cls, int pipe, int stage, int mb) {
    return id[((static_cast<std::size_t>(cls) * pipes + pipe) * stages + stage) * mbs + mb];
  }
};

int op_class(OpKind k) {
  return k == OpKind::F ? 0 : k == OpKind::W ? 2 : 1;
}

}  // namespace

SearchGraph SearchGraph::build(const Schedule& s, const Costs& costs) {
  SearchGraph g;
  g.shell = s;
  g.shell.ops.assign(s.ops.size(), {});
  const double scale = work_per_micro_batch(s);
  OpIndex index(s.pipes(), s.stages, s.schedule_micro_batches);
  for (int w = 0; w < static_cast<int>(s.ops.size()); ++w) {
    for (const Op& op : s.ops[w]) {
      const int id = g.size();
      g.ops.push_back(op);
      g.worker.push_back(w);
      const double c = static_cast<double>(op.mbs.size()) * scale;
      const double x = op.kind == OpKind::F   ? costs.F
                       : op.kind == OpKind::B ? costs.B
                       : op.kind == OpKind::I ? costs.I
                                              : costs.W;
      g.cost.push_back(x * c);
      g.held.push_back(activation_delta(s, op));
      for (int mb : op.mbs) index.at(op_class(op.kind), op.pipe, op.stage, mb) = id;
    }
  }
  const int n = g.size();
  std::vector<std::vector<int>> deps(static_cast<std::size_t>(n));
  for (int id = 0; id < n; ++id) {
    const Op& op = g.ops[id];
    auto add = [&](int d) {
      CHIMERA_CHECK(d >= 0, "search: {} has a missing input", op_label(s, op));
      if (std::find(deps[id].begin(), deps[id].end(), d) == deps[id].end()) deps[id].push_back(d);
    };
    for (int mb : op.mbs) {
      if (op.kind == OpKind::F) {
        if (op.stage > 0) add(index.at(0, op.pipe, op.stage - 1, mb));
      } else if (op.kind == OpKind::W) {
        add(index.at(1, op.pipe, op.stage, mb));
      } else {
        add(index.at(0, op.pipe, op.stage, mb));
        if (op.stage + 1 < s.stages) add(index.at(1, op.pipe, op.stage + 1, mb));
      }
    }
  }
  std::vector<std::vector<int>> succs(static_cast<std::size_t>(n));
  g.dep_begin.push_back(0);
  for (int id = 0; id < n; ++id) {
    for (int d : deps[id]) {
      g.deps.push_back(d);
      succs[d].push_back(id);
    }
    g.dep_begin.push_back(static_cast<int>(g.deps.size()));
  }
  g.succ_begin.push_back(0);
  for (int id = 0; id < n; ++id) {
    g.succs.insert(g.succs.end(), succs[id].begin(), succs[id].end());
    g.succ_begin.push_back(static_cast<int>(g.succs.size()));
  }
  return g;
}

Order SearchGraph::order_of_schedule() const {
  Order order(shell.ops.size());
  for (int id = 0; id < size(); ++id) order[worker[id]].push_back(id);
  return order;
}

Schedule SearchGraph::to_schedule(const Order& order) const {
  Schedule s = shell;
  for (std::size_t w = 0; w < order.size(); ++w) {
    for (int id : order[w]) s.ops[w].push_back(ops[id]);
  }
  return s;
}

Evaluation evaluate(const SearchGraph& g, const Order& order, double cap, std::int64_t& work) {
  const int n = g.size();
  const int workers = static_cast<int>(order.size());
  thread_local std::vector<double> end;
  end.assign(static_cast<std::size_t>(n), -1.0);
  std::vector<std::size_t> pos(static_cast<std::size_t>(workers), 0);
  std::vector<double> free_at(static_cast<std::size_t>(workers), 0.0);
  std::vector<double> held(static_cast<std::size_t>(workers), 0.0);
  Evaluation e;
  int done = 0;
  // Sweep the workers, each running ops while their inputs are done, until nobody moves.
  for (bool moved = true; moved;) {
    moved = false;
    for (int w = 0; w < workers; ++w) {
      const auto& ops = order[w];
      while (pos[w] < ops.size()) {
        const int id = ops[pos[w]];
        double start = free_at[w];
        bool ready = true;
        for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k) {
          const double t = end[g.deps[k]];
          if (t < 0) {
            ready = false;
            break;
          }
          start = std::max(start, t);
        }
        if (!ready) break;
        held[w] += g.held[id];
        if (held[w] > cap + 1e-9) {
          work += done;
          return e;
        }
        end[id] = start + g.cost[id];
        free_at[w] = end[id];
        e.sum_end += end[id];
        ++pos[w];
        ++done;
        moved = true;
      }
    }
  }
  work += done;
  if (done != n) return e;
  e.ok = true;
  e.makespan = *std::max_element(free_at.begin(), free_at.end());
  return e;
}

Schedule split_backwards(const Schedule& s) {
  Schedule out = s;
  for (auto& ops : out.ops) {
    std::vector<Op> split;
    split.reserve(ops.size() * 2);
    for (const Op& op : ops) {
      if (op.kind != OpKind::B) {
        split.push_back(op);
        continue;
      }
      split.push_back({OpKind::I, op.pipe, op.stage, op.mbs});
      split.push_back({OpKind::W, op.pipe, op.stage, op.mbs});
    }
    ops = std::move(split);
  }
  return out;
}

}  // namespace chimera::schedule::detail
