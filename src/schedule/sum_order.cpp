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
  for (const auto& instructions : program.workers) {
    int previous = -1;
    for (const auto& instr : instructions) {
      if (instr.kind != InstrKind::GradReady && instr.kind != InstrKind::TiedGradReady) continue;
      const int sum = instr.kind == InstrKind::GradReady ? instr.stage : tied;
      if (previous >= 0) next[static_cast<std::size_t>(previous)].insert(sum);
      previous = sum;
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
