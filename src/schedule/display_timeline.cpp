#include <algorithm>

#include "chimera/schedule/render.hpp"
#include "op_graph.hpp"

namespace chimera::schedule {

std::vector<std::vector<OpSpan>> display_timeline(const Schedule& schedule, const SimResult& result,
                                                  const Costs& costs) {
  const detail::OpGraph graph = detail::verified_graph(schedule);
  std::vector<std::vector<OpSpan>> shown = result.timeline;
  const double message = costs.alpha + costs.beta * costs.activation_bytes / schedule.mb_split;
  for (int w = 0; w < schedule.workers; ++w) {
    auto& line = shown[w];
    // Backwards through the worker, so a run of entering forwards moves as one.
    for (int k = static_cast<int>(line.size()) - 1; k >= 0; --k) {
      const int id = graph.id(w, k);
      if (!graph.inputs(id).empty()) continue;
      double latest_end =
          k + 1 < static_cast<int>(line.size()) ? line[k + 1].start : result.makespan;
      for (int consumer : graph.consumers(id)) {
        const OpSpan& c = shown[graph.worker(consumer)][graph.index(consumer)];
        latest_end = std::min(latest_end, c.start - (graph.worker(consumer) == w ? 0 : message));
      }
      const double duration = line[k].end - line[k].start;
      const double start = std::max(line[k].start, latest_end - duration);
      line[k] = {line[k].op, start, start + duration};
    }
  }
  return shown;
}

}  // namespace chimera::schedule
