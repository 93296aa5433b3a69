#pragma once
// Everything a run derives from its configuration before any rank computes: the verified schedule
// and its lowering, the model shape and partition, the rank layout. Pure and identical on every
// rank (the configuration hash is checked first), so its InputErrors end every rank together.
#include <cstdint>

#include "chimera/comm/topology.hpp"
#include "chimera/core/config.hpp"
#include "chimera/data/sampler.hpp"
#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/layers.hpp"
#include "chimera/model/partition.hpp"
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::runtime {

struct RunPlan {
  Config config;
  schedule::Schedule schedule;
  schedule::Program program;
  model::GPT2Config model;
  model::StagePartition partition{{1}};
  comm::Topology topology;
  bool emulate = false;
  int seq_len = 0;  // T
  // The configured batch, W replicas x N micro-batches x B samples: what the sampler reads.
  // The schedule runs N x mb_split micro-batches (schedule.schedule_micro_batches) of
  // B / mb_split samples.
  data::BatchLayout batch;
  // One schedule micro-batch through a stage (B / mb_split samples of T tokens), built once.
  model::Dims stage_dims;

  // Validates the configuration for a world of `world_size` ranks and builds the plan for `rank`.
  static RunPlan make(const Config& config, int world_size, int rank);

  std::int64_t global_batch() const { return batch.global_batch(); }  // W * N * B samples
  std::int64_t tokens_per_step() const { return global_batch() * seq_len; }
  // 1 / (W * schedule micro-batches): the loss scale that makes gradients the global-batch mean.
  float loss_scale() const;
};

}  // namespace chimera::runtime
