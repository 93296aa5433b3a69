#pragma once
// The search's view of a schedule: its ops as ids with costs, activation deltas and data
// dependencies, fixed while the search reorders each worker's ops. evaluate() replays an order
// as the simulator does with free messages (every op starts when its worker is free and its
// inputs are done), so its makespan is the simulator's; it also checks the activation cap and
// finds deadlocks (an order that cannot finish).
#include <cstdint>
#include <vector>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::schedule::detail {

using Order = std::vector<std::vector<int>>;  // [worker] -> op ids in program order

struct SearchGraph {
  Schedule shell;                    // the schedule without ops: placement, pipes, stages, ...
  std::vector<Op> ops;               // [id]
  std::vector<int> worker;           // [id]
  std::vector<double> cost;          // [id] simulated time
  std::vector<double> held;          // [id] activations it adds (F) or frees (B, W; negative)
  std::vector<int> dep_begin, deps;  // deps of id: deps[dep_begin[id] .. dep_begin[id+1])
  std::vector<int> succ_begin, succs;

  // The ops of `s` as ids (worker by worker, in s's order, which `order_of` returns).
  static SearchGraph build(const Schedule& s, const Costs& costs);
  Order order_of_schedule() const;
  Schedule to_schedule(const Order& order) const;
  int size() const { return static_cast<int>(ops.size()); }
};

struct Evaluation {
  bool ok = false;  // finishes (no deadlock) within the cap
  double makespan = 0;
  double sum_end = 0;  // sum of the op end times: a tie-breaker that favours earlier ops
};

// Replays `order`. `work` counts ops replayed (the search's deterministic effort measure).
Evaluation evaluate(const SearchGraph& g, const Order& order, double cap, std::int64_t& work);

// A small deterministic generator (splitmix64): the same seed gives the same search everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// Every op of `structure`'s placement once, as single micro-batch F, I and W ops, in no
// particular order: what the list scheduler orders.
Schedule all_split_ops(const Schedule& structure);

// One greedy list schedule of all of g's ops: whenever a worker is free, it runs, among its ops
// whose inputs are done (an F only while the cap allows it), the one a randomly drawn priority
// rule prefers. False when every worker is stuck at the cap.
bool list_schedule(const SearchGraph& g, double cap, Rng& rng, Order& order, std::int64_t& work);

// `s` with every B replaced by I then W on the same micro-batches: same makespan and peak
// activations (I + W = B), but W can then move.
Schedule split_backwards(const Schedule& s);

}  // namespace chimera::schedule::detail
