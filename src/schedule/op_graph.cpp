#include "op_graph.hpp"

#include "wait_for.hpp"

#include "chimera/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace chimera::schedule::detail {

namespace {

// Schedules beyond this many (stage, micro-batch) cells are refused rather than risking memory.
constexpr std::int64_t kMaxCells = std::int64_t{1} << 26;

std::string where(const Schedule& s, int worker, int index) {
  return fmt::format("worker {} op {} ({})", worker, index, op_label(s, s.ops[worker][index]));
}

// The op ids that run (kind, stage, micro-batch); -1 where none does.
struct OpTable {
  int micro_batches = 0;
  std::vector<int> f, b, i, w;  // [stage * micro_batches + mb]

  std::vector<int>& of(OpKind kind) {
    switch (kind) {
      case OpKind::F:
        return f;
      case OpKind::B:
        return b;
      case OpKind::I:
        return i;
      case OpKind::W:
        return w;
    }
    return f;
  }
  std::size_t cell(int stage, int mb) const {
    return static_cast<std::size_t>(stage) * static_cast<std::size_t>(micro_batches) +
           static_cast<std::size_t>(mb);
  }
  // The op whose output is the input gradient of (stage, mb): a full B, or the I of a split one.
  int backward_input(int stage, int mb) const {
    const std::size_t c = cell(stage, mb);
    return b[c] >= 0 ? b[c] : i[c];
  }
};

std::string check_shape(const Schedule& s) {
  if (s.workers < 1) return fmt::format("workers = {}: a schedule needs at least 1", s.workers);
  if (s.stages < 1) return fmt::format("stages = {}: a schedule needs at least 1", s.stages);
  if (s.schedule_micro_batches < 1) {
    return fmt::format("micro_batches = {}: a schedule needs at least 1", s.schedule_micro_batches);
  }
  if (s.mb_split < 1 || s.schedule_micro_batches % s.mb_split != 0) {
    return fmt::format("mb_split = {} must be >= 1 and divide micro_batches = {}", s.mb_split,
                       s.schedule_micro_batches);
  }
  if (std::int64_t{s.stages} * s.schedule_micro_batches > kMaxCells) {
    return fmt::format("stages * micro_batches = {} exceeds the limit {}",
                       std::int64_t{s.stages} * s.schedule_micro_batches, kMaxCells);
  }
  if (static_cast<int>(s.ops.size()) != s.workers) {
    return fmt::format("ops lists {} workers, workers = {}", s.ops.size(), s.workers);
  }
  if (s.placement.empty()) return "placement is empty: a schedule needs at least one pipe";
  for (int p = 0; p < s.pipes(); ++p) {
    if (static_cast<int>(s.placement[p].size()) != s.stages) {
      return fmt::format("placement of pipe {} has {} stages, stages = {}", p,
                         s.placement[p].size(), s.stages);
    }
    for (int st = 0; st < s.stages; ++st) {
      const int w = s.placement[p][st];
      if (w < 0 || w >= s.workers) {
        return fmt::format("placement puts pipe {} stage {} on worker {}, not in [0, {})", p, st, w,
                           s.workers);
      }
    }
  }
  if (static_cast<int>(s.pipe_of.size()) != s.schedule_micro_batches) {
    return fmt::format("pipe_of has {} entries, micro_batches = {}", s.pipe_of.size(),
                       s.schedule_micro_batches);
  }
  for (int m = 0; m < s.schedule_micro_batches; ++m) {
    if (s.pipe_of[m] < 0 || s.pipe_of[m] >= s.pipes()) {
      return fmt::format("pipe_of[{}] = {} is not a pipe in [0, {})", m, s.pipe_of[m], s.pipes());
    }
  }
  return {};
}

std::string check_op(const Schedule& s, int worker, int index) {
  const Op& op = s.ops[worker][index];
  const auto at = [&] { return fmt::format("worker {} op {}", worker, index); };
  if (op.pipe < 0 || op.pipe >= s.pipes()) {
    return fmt::format("{}: pipe {} is not in [0, {})", at(), op.pipe, s.pipes());
  }
  if (op.stage < 0 || op.stage >= s.stages) {
    return fmt::format("{}: stage {} is not in [0, {})", at(), op.stage, s.stages);
  }
  if (op.mbs.empty()) return fmt::format("{}: covers no micro-batch", at());
  for (std::size_t k = 0; k < op.mbs.size(); ++k) {
    const int m = op.mbs[k];
    if (m < 0 || m >= s.schedule_micro_batches) {
      return fmt::format("{}: micro-batch {} is not in [0, {})", at(), m, s.schedule_micro_batches);
    }
    if (std::find(op.mbs.begin(), op.mbs.begin() + static_cast<std::ptrdiff_t>(k), m) !=
        op.mbs.begin() + static_cast<std::ptrdiff_t>(k)) {
      return fmt::format("{}: covers micro-batch {} twice", at(), m);
    }
    if (s.pipe_of[m] != op.pipe) {
      return fmt::format("{}: micro-batch {} belongs to pipe {}, the op runs it on pipe {}",
                         where(s, worker, index), m, s.pipe_of[m], op.pipe);
    }
  }
  const int owner = s.placement[op.pipe][op.stage];
  if (owner != worker) {
    return fmt::format("{}: wrong worker: placement puts pipe {} stage {} on worker {}",
                       where(s, worker, index), op.pipe, op.stage, owner);
  }
  return {};
}

}  // namespace

std::optional<OpGraph> OpGraph::build(const Schedule& s, std::string& problem) {
  problem = check_shape(s);
  if (!problem.empty()) return std::nullopt;

  OpGraph g;
  g.offset_.assign(static_cast<std::size_t>(s.workers) + 1, 0);
  for (int w = 0; w < s.workers; ++w) {
    g.offset_[w + 1] = g.offset_[w] + static_cast<int>(s.ops[w].size());
  }
  const int n = g.offset_[s.workers];
  g.worker_of_.resize(static_cast<std::size_t>(n));
  for (int w = 0; w < s.workers; ++w) {
    std::fill(g.worker_of_.begin() + g.offset_[w], g.worker_of_.begin() + g.offset_[w + 1], w);
  }

  // Who runs what, exactly once.
  OpTable table;
  table.micro_batches = s.schedule_micro_batches;
  const std::size_t cells = static_cast<std::size_t>(s.stages) * s.schedule_micro_batches;
  for (auto* v : {&table.f, &table.b, &table.i, &table.w}) v->assign(cells, -1);
  for (int w = 0; w < s.workers; ++w) {
    for (int k = 0; k < static_cast<int>(s.ops[w].size()); ++k) {
      problem = check_op(s, w, k);
      if (!problem.empty()) return std::nullopt;
      const Op& op = s.ops[w][k];
      for (int m : op.mbs) {
        int& slot = table.of(op.kind)[table.cell(op.stage, m)];
        if (slot >= 0) {
          problem = fmt::format("{}: duplicate: micro-batch {} already runs {} at stage {} as {}",
                                where(s, w, k), m, op_letter(op.kind), op.stage,
                                where(s, g.worker(slot), g.index(slot)));
          return std::nullopt;
        }
        slot = g.id(w, k);
      }
    }
  }
  for (int m = 0; m < s.schedule_micro_batches; ++m) {
    const int p = s.pipe_of[m];
    for (int st = 0; st < s.stages; ++st) {
      const std::size_t c = table.cell(st, m);
      const int owner = s.placement[p][st];
      if (table.f[c] < 0) {
        problem =
            fmt::format("missing op: micro-batch {} has no F at stage {} (pipe {}, worker {})", m,
                        st, p, owner);
        return std::nullopt;
      }
      const bool split = table.i[c] >= 0 || table.w[c] >= 0;
      if (s.forward_only) {
        if (table.b[c] >= 0 || split) {
          problem = fmt::format(
              "micro-batch {} at stage {} runs a backward in a forward-only schedule", m, st);
          return std::nullopt;
        }
        continue;
      }
      if (table.b[c] >= 0 && split) {
        problem = fmt::format(
            "micro-batch {} at stage {} has both a B and a split backward (I/W); one of them", m,
            st);
        return std::nullopt;
      }
      if (table.b[c] < 0 && !split) {
        problem =
            fmt::format("missing op: micro-batch {} has no B at stage {} (pipe {}, worker {})", m,
                        st, p, owner);
        return std::nullopt;
      }
      if (split && (table.i[c] < 0 || table.w[c] < 0)) {
        problem =
            fmt::format("missing op: micro-batch {} has no {} at stage {} (pipe {}, worker {})", m,
                        table.i[c] < 0 ? 'I' : 'W', st, p, owner);
        return std::nullopt;
      }
    }
  }

  // Data inputs, one per micro-batch.
  g.input_begin_.assign(static_cast<std::size_t>(n) + 1, 0);
  for (int id = 0; id < n; ++id) {
    const int w = g.worker(id);
    const Op& op = s.ops[w][g.index(id)];
    auto add = [&](int producer, int mb, OpInput::Kind kind) {
      g.inputs_.push_back({producer, mb, kind, g.worker(producer) != w});
    };
    for (int m : op.mbs) {
      switch (op.kind) {
        case OpKind::F:
          if (op.stage > 0) add(table.f[table.cell(op.stage - 1, m)], m, OpInput::Kind::Activation);
          break;
        case OpKind::B:
        case OpKind::I:
          add(table.f[table.cell(op.stage, m)], m, OpInput::Kind::Stash);
          if (op.stage + 1 < s.stages) {
            add(table.backward_input(op.stage + 1, m), m, OpInput::Kind::Gradient);
          }
          break;
        case OpKind::W:
          add(table.i[table.cell(op.stage, m)], m, OpInput::Kind::Stash);
          break;
      }
    }
    g.input_begin_[id + 1] = static_cast<int>(g.inputs_.size());
  }

  // Consumers (one entry per input, so duplicates count twice, as in indegrees).
  g.consumer_begin_.assign(static_cast<std::size_t>(n) + 1, 0);
  for (const OpInput& in : g.inputs_) ++g.consumer_begin_[in.producer + 1];
  for (int id = 0; id < n; ++id) g.consumer_begin_[id + 1] += g.consumer_begin_[id];
  g.consumers_.resize(g.inputs_.size());
  std::vector<int> fill(g.consumer_begin_.begin(), g.consumer_begin_.end() - 1);
  for (int id = 0; id < n; ++id) {
    for (const OpInput& in : g.inputs(id)) g.consumers_[fill[in.producer]++] = id;
  }
  return g;
}

std::vector<int> OpGraph::topological_order() const {
  const int n = size();
  std::vector<int> waiting(static_cast<std::size_t>(n));
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(n));
  for (int id = 0; id < n; ++id) {
    waiting[id] = static_cast<int>(inputs(id).size()) + (index(id) > 0 ? 1 : 0);
    if (waiting[id] == 0) order.push_back(id);
  }
  const int workers = static_cast<int>(offset_.size()) - 1;
  for (std::size_t head = 0; head < order.size(); ++head) {
    const int id = order[head];
    auto release = [&](int next) {
      if (--waiting[next] == 0) order.push_back(next);
    };
    for (int c : consumers(id)) release(c);
    const int w = worker(id);
    if (w < workers && id + 1 < offset_[w + 1]) release(id + 1);
  }
  return order;
}

std::string OpGraph::describe_cycle(const Schedule& s, const std::vector<int>& order) const {
  std::vector<char> stuck(static_cast<std::size_t>(size()), 1);
  for (int id : order) stuck[id] = 0;
  const std::vector<int> cycle = shortest_cycle(stuck, [&](int id, auto&& visit) {
    if (index(id) > 0) visit(id - 1);
    for (const OpInput& in : inputs(id)) visit(in.producer);
  });
  CHIMERA_CHECK(!cycle.empty(), "ops were left out of the topological order without a cycle");
  // Why `id` waits for `next`: a data input if there is one, else program order.
  auto reason = [&](int id, int next) -> std::string {
    for (const OpInput& in : inputs(id)) {
      if (in.producer != next) continue;
      const Op& producer = s.ops[worker(next)][index(next)];
      switch (in.kind) {
        case OpInput::Kind::Activation:
          return fmt::format("activation of stage {}, micro-batch {}", producer.stage, in.mb);
        case OpInput::Kind::Gradient:
          return fmt::format("gradient of stage {}, micro-batch {}", producer.stage, in.mb);
        case OpInput::Kind::Stash:
          return fmt::format("its own {} of micro-batch {}", op_letter(producer.kind), in.mb);
      }
    }
    return "program order";
  };
  std::vector<std::string> steps;
  for (std::size_t k = 0; k < cycle.size(); ++k) {
    const int next = cycle[(k + 1) % cycle.size()];
    steps.push_back(
        fmt::format("{} ({})", where(s, worker(next), index(next)), reason(cycle[k], next)));
  }
  return "deadlock: cyclic wait: " +
         describe_waits(where(s, worker(cycle.front()), index(cycle.front())), steps);
}

std::string describe_waits(const std::string& first, const std::vector<std::string>& steps) {
  constexpr std::size_t kShown = 8;
  std::string text = first;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (k + 1 == kShown && steps.size() > kShown) {
      text += fmt::format(", which waits for ... ({} more)", steps.size() - k - 1);
      k = steps.size() - 1;
    }
    text += (k == 0 ? " waits for " : ", which waits for ") + steps[k];
  }
  return text;
}

Message input_message(const Schedule& s, const OpGraph& g, int consumer, const OpInput& in) {
  const Op& op = s.ops[g.worker(consumer)][g.index(consumer)];
  const bool activation = in.kind == OpInput::Kind::Activation;
  return Message{activation ? Payload::Activation : Payload::Gradient,
                 op.pipe,
                 activation ? op.stage - 1 : op.stage + 1,
                 in.mb,
                 g.worker(in.producer),
                 g.worker(consumer)};
}

}  // namespace chimera::schedule::detail
