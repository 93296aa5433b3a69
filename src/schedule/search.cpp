// The search driver (docs/schedules.md "Search"):
//   1. every built-in for D and N (builtin_candidates) is simulated; those within the cap are the
//      starting points, the best of them the result unless the search beats it;
//   2. list scheduling: for every placement of a built-in within the cap whose ops each cover one
//      micro-batch (the single pipe s -> s, Chimera's 2f-pipe placements, GEMS, interleaved),
//      greedy list schedules of all its F, I, W ops under randomly drawn priority rules;
//   3. local search: the best orders (list schedules and the built-ins with B split into I + W)
//      are improved by hill climbing: move one op of one worker a few places earlier or later,
//      keep the move when the order still finishes (no deadlock), the cap holds and the makespan
//      does not grow (ties broken by the sum of op end times, so plateaus are crossed).
// The effort is counted in replayed ops, not seconds, so a seed gives the same result on any
// machine; a wall-clock guard (twice the budget) stops a search on a much slower machine.
#include <fmt/format.h>
#include <algorithm>
#include <chrono>

#include "chimera/core/error.hpp"
#include "chimera/schedule/search.hpp"
#include "chimera/schedule/verify.hpp"
#include "search_graph.hpp"

namespace chimera::schedule {

namespace {

using detail::Evaluation;
using detail::Order;
using detail::SearchGraph;

// Replayed ops per second of budget: about half what this 2-core shared machine replays at
// D = 16, N = 32, so the budget is a conservative time.
constexpr double kOpsPerSecond = 3e7;

struct Entry {
  int graph = 0;
  Order order;
  Evaluation eval;
  std::string origin;
};

bool better(const Evaluation& a, const Evaluation& b) {
  if (a.makespan < b.makespan - 1e-9) return true;
  return a.makespan <= b.makespan + 1e-9 && a.sum_end < b.sum_end - 1e-9;
}

bool same_structure(const Schedule& a, const Schedule& b) {
  return a.stages == b.stages && a.mb_split == b.mb_split && a.placement == b.placement &&
         a.pipe_of == b.pipe_of;
}

bool single_micro_batch_ops(const Schedule& s) {
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      if (op.mbs.size() != 1) return false;
    }
  }
  return s.mb_split == 1;
}

class Search {
 public:
  Search(const SearchOptions& o, double cap)
      : cap_(cap),
        rng_(o.seed),
        budget_(static_cast<std::int64_t>(o.seconds * kOpsPerSecond)),
        guard_(std::max(2 * o.seconds, 0.5)),
        start_(std::chrono::steady_clock::now()) {}

  std::vector<SearchGraph> graphs;
  std::int64_t work = 0;
  std::int64_t evaluations = 0;
  bool stopped_by_clock = false;

  std::int64_t budget() const { return budget_; }
  bool out_of_time(std::int64_t limit) {
    if (work >= limit) return true;
    if ((evaluations & 63) == 0 && elapsed() > guard_) stopped_by_clock = true;
    return stopped_by_clock;
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Step 2: list schedules over every structure, round robin, for `share` of the budget.
  void list_phase(std::vector<Entry>& pool, double share) {
    std::vector<int> structures;
    for (int k = 0; k < static_cast<int>(graphs.size()); ++k) {
      if (graphs[k].shell.scheme == "list") structures.push_back(k);
    }
    if (structures.empty()) return;
    const std::int64_t limit = static_cast<std::int64_t>(share * static_cast<double>(budget_));
    std::vector<Entry> best(structures.size());
    for (std::int64_t attempt = 0; !out_of_time(limit); ++attempt) {
      const std::size_t k = static_cast<std::size_t>(attempt) % structures.size();
      const SearchGraph& g = graphs[structures[k]];
      Order order;
      ++evaluations;
      if (!detail::list_schedule(g, cap_, rng_, order, work)) continue;
      const Evaluation e = detail::evaluate(g, order, cap_, work);
      if (!e.ok) continue;
      if (best[k].order.empty() || better(e, best[k].eval)) {
        best[k] = {structures[k], std::move(order), e, g.shell.variant};
      }
    }
    for (Entry& e : best) {
      if (!e.order.empty()) pool.push_back(std::move(e));
    }
  }

  // Step 3: hill climbing on `entry` until `limit`.
  void improve(Entry& entry, std::int64_t limit, double bound) {
    const SearchGraph& g = graphs[entry.graph];
    Order& order = entry.order;
    const int workers = static_cast<int>(order.size());
    // At the bound nothing can be gained.
    while (entry.eval.makespan > bound + 1e-9 && !out_of_time(limit)) {
      const int w = rng_.below(workers);
      auto& ops = order[w];
      const int len = static_cast<int>(ops.size());
      if (len < 2) continue;
      const int window = rng_.below(4) == 0 ? 32 : 6;
      const int i = rng_.below(len);
      int j = i + (rng_.below(2) == 0 ? -1 : 1) * (1 + rng_.below(window));
      j = std::clamp(j, 0, len - 1);
      if (i == j) continue;
      move(ops, i, j);
      ++evaluations;
      const Evaluation e = detail::evaluate(g, order, cap_, work);
      if (e.ok && !better(entry.eval, e)) {
        entry.eval = e;
      } else {
        move(ops, j, i);
      }
    }
  }

 private:
  static void move(std::vector<int>& ops, int from, int to) {
    if (from < to) {
      std::rotate(ops.begin() + from, ops.begin() + from + 1, ops.begin() + to + 1);
    } else {
      std::rotate(ops.begin() + to, ops.begin() + from, ops.begin() + from + 1);
    }
  }

  double cap_;
  detail::Rng rng_;
  std::int64_t budget_;
  double guard_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

SearchResult search_schedule(const SearchOptions& o) {
  const int D = o.workers;
  const int N = o.micro_batches;
  CHIMERA_REQUIRE(D >= 1 && N >= 1, "search needs D >= 1 and N >= 1 (got D={}, N={})", D, N);
  // The cap counts chunk-activations (simulate.hpp); the peaks below count stage-units.
  const double cap_chunks = o.max_in_flight > 0 ? o.max_in_flight : to_chunks(D);
  const double cap = from_chunks(cap_chunks);
  CHIMERA_REQUIRE(o.max_in_flight >= 0, "--max-in-flight {}: expected a positive cap",
                  o.max_in_flight);
  CHIMERA_REQUIRE(o.seconds > 0 && o.seconds <= 3600, "--search-seconds {}: expected (0, 3600]",
                  o.seconds);
  Costs costs = o.costs;
  costs.alpha = costs.beta = 0;  // compute only: the makespan the search and the bound reason about

  SearchResult r;
  Search search(o, cap);
  const std::vector<Candidate> candidates = builtin_candidates(D, N);
  r.builtins_tried = static_cast<int>(candidates.size());
  const Candidate* best = nullptr;
  std::vector<Schedule> structures;
  std::vector<Entry> pool;
  r.lower_bound = std::numeric_limits<double>::infinity();
  for (const Candidate& c : candidates) {
    const SimResult sim = Simulator(c.schedule).run(costs);
    if (*std::max_element(sim.peak_activations.begin(), sim.peak_activations.end()) > cap + 1e-9) {
      continue;
    }
    ++r.builtins_within_cap;
    r.lower_bound = std::min(r.lower_bound, structure_lower_bound(c.schedule, costs));
    if (best == nullptr || sim.makespan < r.builtin_makespan - 1e-9) {
      best = &c;
      r.builtin_makespan = sim.makespan;
    }
    // The built-in with its backwards split, as a local-search start.
    Schedule split = detail::split_backwards(c.schedule);
    split.variant = c.label;
    search.graphs.push_back(SearchGraph::build(split, costs));
    const SearchGraph& g = search.graphs.back();
    Order order = g.order_of_schedule();
    const Evaluation e = detail::evaluate(g, order, cap, search.work);
    if (e.ok) pool.push_back({static_cast<int>(search.graphs.size()) - 1, order, e, c.label});
    // Its placement, for list scheduling (once per placement).
    if (!single_micro_batch_ops(c.schedule)) continue;
    if (std::any_of(structures.begin(), structures.end(),
                    [&](const Schedule& s) { return same_structure(s, c.schedule); })) {
      continue;
    }
    structures.push_back(c.schedule);
    Schedule all = detail::all_split_ops(c.schedule);
    all.scheme = "list";
    all.variant = fmt::format("list schedule on the {} placement", c.label);
    search.graphs.push_back(SearchGraph::build(all, costs));
  }
  CHIMERA_REQUIRE(best != nullptr,
                  "no built-in schedule for D={}, N={} holds at most {} chunk-activations per "
                  "worker: raise --max-in-flight",
                  D, N, cap_chunks);

  // A built-in at the bound is optimal: searching cannot beat it.
  if (r.builtin_makespan <= r.lower_bound + 1e-9) pool.clear();
  if (!pool.empty()) search.list_phase(pool, 0.3);
  std::sort(pool.begin(), pool.end(),
            [](const Entry& a, const Entry& b) { return better(a.eval, b.eval); });
  if (pool.size() > 4) pool.resize(4);
  // The best start gets half of what is left, the others share the rest.
  const std::int64_t left = std::max<std::int64_t>(search.budget() - search.work, 0);
  std::int64_t limit = search.work;
  for (std::size_t k = 0; k < pool.size(); ++k) {
    const double share = k == 0 ? 0.5 : 0.5 / static_cast<double>(pool.size() - 1);
    limit += static_cast<std::int64_t>(share * static_cast<double>(left));
    if (k + 1 == pool.size()) limit = search.budget();
    search.improve(pool[k], limit, r.lower_bound);
  }
  const Entry* win = nullptr;
  for (const Entry& e : pool) {
    if (win == nullptr || better(e.eval, win->eval)) win = &e;
  }

  r.best_builtin = best->label;
  if (win != nullptr && win->eval.makespan < r.builtin_makespan - 1e-9) {
    r.schedule = search.graphs[win->graph].to_schedule(win->order);
    r.schedule.variant = fmt::format("{} + local search", win->origin);
  } else {
    r.schedule = best->schedule;
    r.schedule.variant = best->label;
  }
  r.schedule.scheme = "search";
  const VerifyResult v = check(r.schedule);
  CHIMERA_CHECK(v.ok, "search produced a broken schedule: {}", v.problem);
  const SimResult sim = Simulator(r.schedule).run(costs);
  r.makespan = sim.makespan;
  r.bubble_ratio = sim.bubble_ratio;
  r.peak_activations = *std::max_element(sim.peak_activations.begin(), sim.peak_activations.end());
  CHIMERA_CHECK(r.peak_activations <= cap + 1e-9, "search exceeded the cap: {} > {}",
                r.peak_activations, cap);
  r.gap = (r.makespan - r.lower_bound) / r.lower_bound;
  r.evaluations = search.evaluations;
  r.seconds = search.elapsed();
  r.stopped_by_clock = search.stopped_by_clock;
  return r;
}

std::string search_summary(const SearchResult& r) {
  const double gained = r.builtin_makespan - r.makespan;
  return fmt::format(
      "search            {} (D={}, N={})\n"
      "makespan          {:g}  bubble ratio {:.3f}  peak activations {:g}\n"
      "lower bound       {:g}  gap {:.1f}%\n"
      "started from      {} ({:g}): improved by {:g} ({:.1f}%)\n"
      "effort            {} built-ins ({} within the cap), {} orders evaluated, {:.1f} s{}\n",
      r.schedule.variant, r.schedule.workers,
      r.schedule.schedule_micro_batches / r.schedule.mb_split, r.makespan, r.bubble_ratio,
      r.peak_activations, r.lower_bound, 100 * r.gap, r.best_builtin, r.builtin_makespan, gained,
      100 * gained / r.builtin_makespan, r.builtins_tried, r.builtins_within_cap, r.evaluations,
      r.seconds, r.stopped_by_clock ? " (stopped by the clock: not reproducible)" : "");
}

}  // namespace chimera::schedule
