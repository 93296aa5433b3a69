#include "chimera/runtime/run_plan.hpp"

#include "chimera/core/error.hpp"
#include "chimera/plan/network.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"

namespace chimera::runtime {

RunPlan RunPlan::make(const Config& config, int world_size, int rank) {
  RunPlan p;
  p.config = config;
  const auto& par = config.parallel;
  p.emulate = config.runtime.compute == ComputeMode::Emulate;
  // A network that does not parse is refused before any rank sets up (it prices the prediction).
  if (!config.runtime.network.empty()) (void)plan::parse_network(config.runtime.network);

  schedule::ScheduleRequest req;
  req.scheme = par.scheme;
  req.stages = par.stages;
  req.micro_batches = par.micro_batches;
  req.variant = par.variant;
  req.pipes = par.pipes;
  req.virtual_stages = par.virtual_stages;
  req.max_in_flight = par.max_in_flight;
  p.schedule = schedule::make_schedule(req);
  // A sharded optimizer's programs wait for each stage's gathered weights (WaitGather).
  p.program = schedule::lower(p.schedule, {.shard_optimizer = par.shard_optimizer});

  p.model = model::GPT2Config::from(config.model);
  p.seq_len = config.data.seq_len;
  p.model.require_seq_len(p.seq_len);
  p.partition = model::make_partition(p.model, p.schedule.stages, par.partition, p.seq_len);

  const int slot_size = schedule::schedule_micro_batch_size(p.schedule, par.micro_batch_size,
                                                            "parallel.micro_batch_size");
  p.stage_dims = model::Dims::of(p.model, slot_size, p.seq_len);

  p.topology = comm::Topology::make(world_size, rank, p.schedule);
  p.batch = data::BatchLayout{p.topology.replicas, p.schedule.configured_micro_batches(),
                              par.micro_batch_size};
  return p;
}

float RunPlan::loss_scale() const {
  return 1.0F / static_cast<float>(topology.replicas * schedule.schedule_micro_batches);
}

}  // namespace chimera::runtime
