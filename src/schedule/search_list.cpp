// Greedy list scheduling for the search: a non-delay schedule over the op dependency graph
// (each free worker starts the best ready op at once), with priorities drawn per attempt so that
// repeated attempts explore different orders. W ops rank last in most rules, so they run when
// nothing else is ready: they fill the bubbles, as in zero-bubble schedules.
#include <algorithm>
#include <array>
#include <limits>

#include "search_graph.hpp"

namespace chimera::schedule::detail {

Schedule all_split_ops(const Schedule& structure) {
  Schedule s = structure;
  s.ops.assign(static_cast<std::size_t>(s.workers), {});
  for (int mb = 0; mb < s.schedule_micro_batches; ++mb) {
    const int pipe = s.pipe_of[mb];
    for (int stage = 0; stage < s.stages; ++stage) {
      auto& ops = s.ops[s.placement[pipe][stage]];
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W}) ops.push_back({k, pipe, stage, {mb}});
    }
  }
  return s;
}

namespace {

// A priority rule: the rank of each op kind, micro-batches in a round-robin order over the pipes
// (pipe order rotated at random), and random noise on top.
struct Rule {
  std::array<int, 4> kind_rank{};  // indexed by OpKind
  std::vector<double> mb_rank;     // [micro-batch]
  double noise = 0;
  bool deep_first = false;  // among equal kinds and ages, the op nearer the last stage first
};

Rule draw_rule(const Schedule& shell, Rng& rng) {
  Rule r;
  const double u = rng.unit();
  // F, B, I, W ranks: backward first (1F1B-like), forward first (GPipe-like, held back by the
  // cap), or W early (frees activations as soon as possible).
  if (u < 0.5)
    r.kind_rank = {1, 0, 0, 2};
  else if (u < 0.85)
    r.kind_rank = {0, 1, 1, 2};
  else
    r.kind_rank = {1, 0, 0, 0};
  const int pipes = shell.pipes();
  const int rotate = rng.below(pipes);
  std::vector<int> seen(static_cast<std::size_t>(pipes), 0);
  r.mb_rank.resize(static_cast<std::size_t>(shell.schedule_micro_batches));
  for (int mb = 0; mb < shell.schedule_micro_batches; ++mb) {
    const int pipe = shell.pipe_of[mb];
    r.mb_rank[mb] = seen[pipe]++ * pipes + (pipe + rotate) % pipes;
  }
  constexpr std::array<double, 4> kNoise = {0, 0.5, 2, 8};
  r.noise = kNoise[rng.below(4)];
  r.deep_first = rng.below(2) == 1;
  return r;
}

}  // namespace

bool list_schedule(const SearchGraph& g, double cap, Rng& rng, Order& order, std::int64_t& work) {
  const Rule rule = draw_rule(g.shell, rng);
  const int n = g.size();
  const int workers = static_cast<int>(g.shell.ops.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<int> missing(static_cast<std::size_t>(n));
  std::vector<double> ready(static_cast<std::size_t>(n), 0.0), end(static_cast<std::size_t>(n));
  std::vector<std::vector<int>> enabled(static_cast<std::size_t>(workers));
  for (int id = 0; id < n; ++id) {
    missing[id] = g.dep_begin[id + 1] - g.dep_begin[id];
    if (missing[id] == 0) enabled[g.worker[id]].push_back(id);
  }
  std::vector<double> free_at(static_cast<std::size_t>(workers), 0.0);
  std::vector<double> held(static_cast<std::size_t>(workers), 0.0);
  order.assign(static_cast<std::size_t>(workers), {});
  auto allowed = [&](int w, int id) { return held[w] + g.held[id] <= cap + 1e-9; };
  for (int scheduled = 0; scheduled < n; ++scheduled) {
    int best_w = -1;
    double best_t = inf;
    for (int w = 0; w < workers; ++w) {
      for (int id : enabled[w]) {
        if (!allowed(w, id)) continue;
        const double t = std::max(free_at[w], ready[id]);
        if (t < best_t) best_t = t, best_w = w;
      }
      work += static_cast<std::int64_t>(enabled[w].size());
    }
    if (best_w < 0) return false;  // every worker waits for memory that never frees
    auto& candidates = enabled[best_w];
    std::size_t pick = candidates.size();
    double best_score = inf;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const int id = candidates[k];
      if (!allowed(best_w, id) || std::max(free_at[best_w], ready[id]) > best_t + 1e-9) continue;
      const Op& op = g.ops[id];
      const double depth = rule.deep_first ? -op.stage : op.stage;
      const double score = rule.kind_rank[static_cast<int>(op.kind)] * 1e9 +
                           rule.mb_rank[op.mbs.front()] + 1e-3 * depth + rule.noise * rng.unit();
      if (score < best_score) best_score = score, pick = k;
    }
    const int id = candidates[pick];
    candidates[pick] = candidates.back();
    candidates.pop_back();
    end[id] = best_t + g.cost[id];
    free_at[best_w] = end[id];
    held[best_w] += g.held[id];
    order[best_w].push_back(id);
    for (int k = g.succ_begin[id]; k < g.succ_begin[id + 1]; ++k) {
      const int next = g.succs[k];
      ready[next] = std::max(ready[next], end[id]);
      if (--missing[next] == 0) enabled[g.worker[next]].push_back(next);
    }
  }
  return true;
}

}  // namespace chimera::schedule::detail
