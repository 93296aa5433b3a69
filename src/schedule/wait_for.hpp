#pragma once
// The shortest cycle of a wait-for graph (node v waits for node u), for describing a deadlock:
// the fewest steps a reader has to follow. Shared by the eager check (op graph) and the
// rendezvous check (lowered program).
#include <algorithm>
#include <cstdint>
#include <vector>

namespace chimera::schedule::detail {

// `stuck[v]`: v never runs; only waits between stuck nodes can close a cycle. `waits_for(v, f)`
// calls f(u) for every u that v waits for. Returns the nodes of a shortest cycle, each waiting
// for the next and the last for the first, starting at its smallest node; empty when none.
// Breadth-first search from every stuck node; the search gives up (keeping the shortest cycle
// found so far) after about `budget` visited waits, so a huge stuck region stays fast.
template <class WaitsFor>
std::vector<int> shortest_cycle(const std::vector<char>& stuck, WaitsFor waits_for,
                                std::int64_t budget = std::int64_t{1} << 25) {
  const int n = static_cast<int>(stuck.size());
  std::vector<int> seen_from(static_cast<std::size_t>(n), -1);
  std::vector<int> parent(static_cast<std::size_t>(n), -1);
  std::vector<int> depth(static_cast<std::size_t>(n), 0);
  std::vector<int> best;
  std::vector<int> queue;
  std::int64_t work = 0;
  for (int start = 0; start < n && work < budget; ++start) {
    if (!stuck[start]) continue;
    queue.assign(1, start);
    seen_from[start] = start;
    depth[start] = 0;
    int closing = -1;  // the node that waits for `start`, closing the cycle
    for (std::size_t head = 0; head < queue.size() && closing < 0; ++head) {
      const int v = queue[head];
      // A cycle through v is at least depth + 1 long: no shorter one can be found beyond here.
      if (!best.empty() && depth[v] + 1 >= static_cast<int>(best.size())) break;
      waits_for(v, [&](int u) {
        ++work;
        if (closing >= 0 || !stuck[u]) return;
        if (u == start) {
          closing = v;
          return;
        }
        if (seen_from[u] == start) return;
        seen_from[u] = start;
        parent[u] = v;
        depth[u] = depth[v] + 1;
        queue.push_back(u);
      });
    }
    if (closing < 0) continue;
    std::vector<int> cycle;
    for (int v = closing; v != start; v = parent[v]) cycle.push_back(v);
    cycle.push_back(start);
    // Reversed, the path reads start -> ... -> closing, each waiting for the next.
    std::vector<int> ordered(cycle.rbegin(), cycle.rend());
    if (best.empty() || ordered.size() < best.size()) best = std::move(ordered);
  }
  if (!best.empty()) {
    const auto smallest = std::min_element(best.begin(), best.end());
    std::rotate(best.begin(), smallest, best.end());
  }
  return best;
}

}  // namespace chimera::schedule::detail
