#pragma once
// Schedule search (docs/schedules.md "Search"): for D workers, N micro-batches, op costs and a cap
// on the activations a worker holds, find a complete, deadlock-free schedule with a small
// simulated makespan. It starts from every built-in schedule that fits, list-schedules the
// built-in placements with the backward split into I and W (W ops fill bubbles), and improves
// the best orders by local search. The result is a schedule like any other (scheme "search").
// No MPI, no model.
#include <cstdint>
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::schedule {

struct SearchOptions {
  int workers = 4;           // D
  int micro_batches = 4;     // N
  Costs costs;               // F, B, I, W (messages are free: alpha = beta = 0 for the search)
  double max_in_flight = 0;  // cap per worker in chunk-activations (simulate.hpp); 0 = 2D
  double seconds = 20;       // search budget (see budget_ops: a fixed amount of work per second)
  std::uint64_t seed = 1;    // same seed, same options: same schedule (unless the clock guard hits)
};

// A built-in schedule the search may start from.
struct Candidate {
  std::string label;  // "zb-h1", "chimera direct, 4 pipes", "interleaved v=2"
  Schedule schedule;
};

// Every built-in for D and N: each scheme of scheme_names() with its variants (chimera direct,
// doubling, halving with every 2f pipes; interleaved v = 2). Requests that throw InputError are
// skipped; the cap is not applied here.
std::vector<Candidate> builtin_candidates(int D, int N);

// A lower bound on the makespan of every schedule with `s`'s placement, pipes, stages and
// micro-batch granularity (any op order, B split into I and W or not), messages free. See
// search_bound.cpp for the derivation.
double structure_lower_bound(const Schedule& s, const Costs& costs);

struct SearchResult {
  Schedule schedule;            // scheme "search", variant naming where it came from
  std::string best_builtin;     // the best built-in within the cap ("" when none fits)
  double builtin_makespan = 0;  // its makespan (0 when none fits)
  double makespan = 0;          // the result's, simulated
  double bubble_ratio = 0;
  double peak_activations = 0;  // the result's largest per-worker peak
  // The smallest structure_lower_bound over the built-ins within the cap: every schedule the
  // search can return has one of their structures.
  double lower_bound = 0;
  double gap = 0;          // (makespan - lower_bound) / lower_bound
  int builtins_tried = 0;  // built-ins generated
  int builtins_within_cap = 0;
  std::int64_t evaluations = 0;   // op orders evaluated (list schedules and local-search moves)
  double seconds = 0;             // wall time spent
  bool stopped_by_clock = false;  // the wall-clock guard ended the search: not reproducible
};

// Throws InputError when D < 1, N < 1, the cap is not positive, or no built-in fits the cap.
SearchResult search_schedule(const SearchOptions& options);

// The summary `chimera schedule --search` prints: makespan, bubble ratio, bound, gap, start,
// improvement, effort.
std::string search_summary(const SearchResult& result);

}  // namespace chimera::schedule
