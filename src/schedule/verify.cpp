#include "chimera/schedule/verify.hpp"

#include "chimera/core/error.hpp"
#include "op_graph.hpp"

namespace chimera::schedule {

namespace {

// The first problem: an incomplete or malformed schedule, else a cycle; empty when none.
std::string first_problem(const Schedule& schedule, std::optional<detail::OpGraph>& graph) {
  std::string problem;
  graph = detail::OpGraph::build(schedule, problem);
  if (!graph) return problem;
  const std::vector<int> order = graph->topological_order();
  if (static_cast<int>(order.size()) != graph->size()) {
    return graph->describe_cycle(schedule, order);
  }
  return {};
}

}  // namespace

VerifyResult check(const Schedule& schedule) {
  std::optional<detail::OpGraph> graph;
  std::string problem = first_problem(schedule, graph);
  return {problem.empty(), std::move(problem)};
}

void verify(const Schedule& schedule) {
  detail::verified_graph(schedule);
}

namespace detail {

OpGraph verified_graph(const Schedule& schedule) {
  std::optional<OpGraph> graph;
  const std::string problem = first_problem(schedule, graph);
  if (!problem.empty()) {
    throw Error(fmt::format("{}invalid {} schedule (D={}, N={}): {}", rank_prefix(),
                            schedule.scheme.empty() ? "unnamed" : schedule.scheme, schedule.workers,
                            schedule.micro_batches, problem));
  }
  return std::move(*graph);
}

}  // namespace detail
}  // namespace chimera::schedule
