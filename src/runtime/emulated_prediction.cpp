#include "emulated_prediction.hpp"

#include <fmt/format.h>

#include <limits>

#include "chimera/core/error.hpp"
#include "chimera/plan/predict.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::runtime {

namespace {

plan::Network network_of(const RunPlan& plan, int ranks_per_host) {
  const int stages = plan.config.parallel.stages;
  CHIMERA_REQUIRE(ranks_per_host >= 1 && stages % ranks_per_host == 0,
                  "runtime.network: the {} ranks on this node must divide parallel.stages ({}) "
                  "for the planner to place them (chimera plan --ranks-per-host); launch "
                  "a divisor of {} ranks per node, or drop runtime.network",
                  ranks_per_host, stages, stages);
  plan::Network network = plan::parse_network(plan.config.runtime.network);
  network.ranks_per_host = ranks_per_host;
  return network;
}

}  // namespace

IterationPrediction predict_emulated_iteration(const RunPlan& plan, int ranks_per_host) {
  const Config& config = plan.config;
  if (config.runtime.network.empty()) {
    schedule::Costs costs = schedule::Costs::parse(config.runtime.cost);
    costs.data_parallel = plan.topology.replicas;
    return {schedule::simulate(plan.schedule, costs).iteration_time, "for these costs"};
  }
  plan::Machine machine;
  machine.network = network_of(plan, ranks_per_host);
  // Memory decides only whether a layout fits, which a run that is running has settled.
  machine.memory_bytes = std::numeric_limits<double>::max();
  machine.compute = plan::ComputeModel::emulated_from(config.runtime.cost);
  const ParallelConfig& p = config.parallel;
  plan::Predictor predict(plan::ModelShape(config.model, config.data.seq_len), machine);
  const plan::Layout layout{p.scheme,
                            p.variant,
                            p.pipes,
                            p.virtual_stages,
                            plan.topology.replicas,
                            p.stages,
                            p.micro_batches,
                            p.micro_batch_size,
                            p.recompute,
                            p.shard_optimizer};
  // describe() names the ranks per host only where several share one.
  return {predict(layout).iteration_ms,
          fmt::format("for these costs and runtime.network ({}{})", plan::describe(machine.network),
                      ranks_per_host == 1 ? ", 1 rank per host" : "")};
}

}  // namespace chimera::runtime
