#include "chimera/schedule/sum_order.hpp"

#include <functional>
#include <set>
#include <vector>

namespace chimera::schedule {

bool sum_order_consistent(const Schedule& sched, const Program& program) {
  // Nodes: the stages, and the tied embedding as node `stages`. Each worker's start order adds an
  // edge from every sum to the next; the orders agree with one global order iff there is no cycle.
  const int tied = sched.stages;
  std::vector<std::set<int>> next(static_cast<std::size_t>(sched.stages) + 1);
  for (std::size_t w = 0; w < program.workers.size(); ++w) {
    std::set<int> held;
    for (const auto& pipe : sched.placement) {
      for (int s = 0; s < sched.stages; ++s) {
        if (pipe[static_cast<std::size_t>(s)] == static_cast<int>(w)) held.insert(s);
      }
    }
    const int tied_held = (held.count(0) > 0 ? 1 : 0) +
                          (sched.stages > 1 && held.count(sched.stages - 1) > 0 ? 1 : 0);
    int tied_ready = 0, previous = -1;
    auto start = [&](int sum) {
      if (previous >= 0) next[static_cast<std::size_t>(previous)].insert(sum);
      previous = sum;
    };
    for (const auto& instr : program.workers[w]) {
      if (instr.kind != InstrKind::GradReady) continue;
      start(instr.stage);
      if ((instr.stage == 0 || instr.stage == sched.stages - 1) && ++tied_ready == tied_held) {
        start(tied);
      }
    }
  }
  // Depth-first search for a back edge.
  std::vector<int> state(next.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::function<bool(int)> acyclic = [&](int u) {
    state[static_cast<std::size_t>(u)] = 1;
    for (const int v : next[static_cast<std::size_t>(u)]) {
      if (state[static_cast<std::size_t>(v)] == 1) return false;
      if (state[static_cast<std::size_t>(v)] == 0 && !acyclic(v)) return false;
    }
    state[static_cast<std::size_t>(u)] = 2;
    return true;
  };
  for (std::size_t u = 0; u < next.size(); ++u) {
    if (state[u] == 0 && !acyclic(static_cast<int>(u))) return false;
  }
  return true;
}

}  // namespace chimera::schedule
