#pragma once
// How a GPU backend's gradient buffers are summed across their ranks, once gpu_paths.hpp chose
// the path: comm::MpiSum's MPI_Iallreduce (Mpi), MPI on a page-locked host copy (HostStagedMpi),
// or NCCL (Nccl: one group per stage communicator and the tied one, sums on the backend's
// collective stream). Every path starts a sum the moment the executor marks the gradient ready.
// A sharded optimizer's sums (reduce-scatter, then all-gather) take the same paths.
#include <mpi.h>

#include <map>
#include <memory>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/communicators.hpp"
#include "chimera/comm/stage_sum.hpp"
#include "chimera/comm/topology.hpp"
#include "chimera/comm/transport.hpp"
#include "gpu_paths.hpp"

namespace chimera::runtime {

class GradSums {
 public:
  // Collective over the world: for Nccl, makes one NCCL group per stage communicator of this rank
  // and the tied one, in increasing stage order with the tied one last (the same order on every
  // rank), agreed and bounded by `watchdog_s` (runtime.watchdog_s; device_group_setup.hpp).
  GradSums(backend::Backend& backend, GradSumPath path, const comm::Communicators& comms,
           const comm::Topology& topo, double watchdog_s);
  ~GradSums();
  GradSums(const GradSums&) = delete;
  GradSums& operator=(const GradSums&) = delete;

  GradSumPath path() const { return path_; }
  // The sum of `g` over `comm`; null for Mpi (comm::MpiSum). Serves as the MPI transport's
  // comm::SumFactory, the one seam where the GPU paths plug in.
  std::unique_ptr<comm::StageSum> make(const comm::GradBuffer& g, MPI_Comm comm);
  // With parallel.shard_optimizer: the reduce-scatter of `g` over `comm`, and after the step the
  // all-gather of `weights` (the buffer's parameters). Nccl runs both on the device group; Mpi
  // and HostStagedMpi stage them through host memory (StagedShardedSum): the reduce-scatter is
  // the CPU's ring, which adds on the host (MPI_Ireduce_scatter, which could take GPU memory
  // with CUDA-aware MPI, costs buffer-sized temporaries: comm/sharded_sum.hpp).
  std::unique_ptr<comm::StageSum> make_sharded(const comm::GradBuffer& g, MPI_Comm comm,
                                               float* weights);

 private:
  backend::Backend& backend_;
  GradSumPath path_;
  std::map<int, std::unique_ptr<backend::DeviceGroup>> groups_;  // by stage, -1 = tied
};

}  // namespace chimera::runtime
