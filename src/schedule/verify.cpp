#include "chimera/schedule/verify.hpp"

#include "chimera/core/error.hpp"
#include "op_graph.hpp"

namespace chimera::schedule {

VerifyResult check(const Schedule& schedule) {
  std::string problem;
  const auto graph = detail::OpGraph::build(schedule, problem);
  if (!graph) return {false, problem};
  const std::vector<int> order = graph->topological_order();
  if (static_cast<int>(order.size()) != graph->size()) {
    return {false, graph->describe_cycle(schedule, order)};
  }
  return {};
}

void verify(const Schedule& schedule) {
  const VerifyResult result = check(schedule);
  if (!result.ok) {
    throw Error(fmt::format("{}invalid {} schedule (D={}, N={}): {}", rank_prefix(),
                            schedule.scheme.empty() ? "unnamed" : schedule.scheme, schedule.workers,
                            schedule.micro_batches, result.problem));
  }
}

}  // namespace chimera::schedule
