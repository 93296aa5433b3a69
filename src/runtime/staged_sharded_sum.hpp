#pragma once
// The sharded optimizer's sum for a backend whose buffers MPI should not touch (GPU memory):
// the gradient crosses to a page-locked host buffer, the CPU's ring reduce-scatter
// (comm::ShardRing) runs there, and only this rank's summed shard goes back up. After the
// optimizer step the updated shard of the weights comes down into the same host buffer, the
// ring's all-gather completes it there, and the other ranks' shards go back up.
//
// The backend's copies are the only access to its memory, so this runs over the CPU backend too
// (plain memory), which is how the tests check it without a GPU.
#include <mpi.h>

#include <cstddef>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/sharded_sum.hpp"
#include "chimera/comm/stage_sum.hpp"

namespace chimera::runtime {

class StagedShardedSum final : public comm::StageSum {
 public:
  // `buffer` and `weights` are backend memory of buffer.count floats; `piece_floats` as
  // comm::ShardRing's.
  StagedShardedSum(backend::Backend& backend, const comm::GradBuffer& buffer, MPI_Comm comm,
                   float* weights, std::size_t piece_floats = comm::ShardRing::kPieceFloats);
  ~StagedShardedSum() override;
  StagedShardedSum(const StagedShardedSum&) = delete;
  StagedShardedSum& operator=(const StagedShardedSum&) = delete;

  const comm::ShardLayout& layout() const { return ring_.layout(); }

 private:
  void begin() override;
  bool arrived() override;
  bool gathers() const override { return true; }
  void begin_gather() override;
  bool gather_arrived() override;
  std::string participants() const override;
  std::string silent_participants() const override;

  backend::Backend& backend_;
  comm::ShardRing ring_;
  float* weights_;
  // The gradient, then the weights: the host side of both halves, one buffer.
  float* host_;
};

}  // namespace chimera::runtime
