#include "staged_sharded_sum.hpp"

#include "chimera/comm/peer_probe.hpp"
#include "chimera/comm/rank_hosts.hpp"

namespace chimera::runtime {

StagedShardedSum::StagedShardedSum(backend::Backend& backend, const comm::GradBuffer& buffer,
                                   MPI_Comm comm, float* weights, std::size_t piece_floats)
    : StageSum(buffer),
      backend_(backend),
      ring_(buffer.name, buffer.count, comm, piece_floats),
      weights_(weights),
      host_(static_cast<float*>(backend.allocate_host(buffer.count * sizeof(float)))) {}

StagedShardedSum::~StagedShardedSum() {
  backend_.deallocate_host(host_);
}

// The copy down when the gradient is ready (the backend's work on it has finished by then:
// RealStageCompute waits for every op).
void StagedShardedSum::begin() {
  backend_.copy_to_host(host_, buffer().data, buffer().count * sizeof(float));
  ring_.start_sum(host_);
}

// Only the summed shard goes back: the optimizer reads no other part of the gradient.
bool StagedShardedSum::arrived() {
  if (!ring_.test_sum()) return false;
  const auto& shard = ring_.layout();
  backend_.copy_from_host(buffer().data + shard.begin(), host_ + shard.begin(),
                          shard.size() * sizeof(float));
  return true;
}

// The copy down of this rank's updated shard; the other ranks' shards arrive by the gather.
void StagedShardedSum::begin_gather() {
  const auto& shard = ring_.layout();
  backend_.copy_to_host(host_ + shard.begin(), weights_ + shard.begin(),
                        shard.size() * sizeof(float));
  ring_.start_gather(host_);
}

// Up go the other ranks' shards, around this rank's, which the device has already.
bool StagedShardedSum::gather_arrived() {
  if (!ring_.test_gather()) return false;
  const auto& shard = ring_.layout();
  backend_.copy_from_host(weights_, host_, shard.begin() * sizeof(float));
  backend_.copy_from_host(weights_ + shard.end(), host_ + shard.end(),
                          (shard.total() - shard.end()) * sizeof(float));
  return true;
}

std::string StagedShardedSum::participants() const {
  return comm::ranks_and_hosts(ring_.comm());
}

std::string StagedShardedSum::silent_participants() const {
  return comm::describe_silent_peers(ring_.comm());
}

}  // namespace chimera::runtime
