#pragma once
// The paths of a GPU run (docs/cuda.md): how activation messages cross ranks (MessagePath) and how
// gradients are summed (GradSumPath), chosen from runtime.messages, runtime.allreduce and facts
// gathered from every rank.
//  - Mpi:           MPI_Iallreduce on the gradient buffers themselves (CUDA-aware MPI);
//  - HostStagedMpi: MPI_Iallreduce on page-locked host copies of them;
//  - Nccl:          NCCL groups on the backend's collective stream.
#include <mpi.h>

#include <string>
#include <string_view>

#include "chimera/backend/backend.hpp"
#include "chimera/core/config.hpp"
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"
#include "message_staging.hpp"

namespace chimera::runtime {

enum class GradSumPath { Mpi, HostStagedMpi, Nccl };
std::string_view to_string(GradSumPath path);

// Whether MPI reads and writes GPU memory itself.
enum class CudaAwareMpi { Yes, No, Unknown };

// What decides the paths of a GPU run, gathered from every rank.
struct GpuFacts {
  CudaAwareMpi cuda_aware_mpi = CudaAwareMpi::Unknown;
  bool device_groups = false;        // the backend has NCCL
  bool devices_shared = false;       // two ranks of one node compute on one GPU (NCCL refuses)
  bool sum_order_consistent = true;  // schedule::sum_order_consistent (schedule/sum_order.hpp)
};

struct GpuPaths {
  MessagePath messages = MessagePath::Direct;
  GradSumPath sums = GradSumPath::Mpi;
  std::string reason;  // one line for the log: why these paths
};

// runtime.messages (auto | device | host) and runtime.allreduce (auto | nccl | mpi) against the
// facts. InputError for a request the facts rule out, naming the fact.
GpuPaths choose_gpu_paths(MessagesMode messages, AllreduceMode allreduce, const GpuFacts& facts);

// What this MPI library says about CUDA-aware transfers (Open MPI's MPIX_Query_cuda_support, Cray
// MPICH's MPICH_GPU_SUPPORT_ENABLED, MVAPICH2's MV2_USE_CUDA); Unknown when it says nothing.
CudaAwareMpi query_cuda_aware_mpi();
// Collective over `world`: every rank's facts combined (any rank lacking NCCL or sharing a device
// counts for all).
GpuFacts gather_gpu_facts(MPI_Comm world, backend::Backend& backend,
                          const schedule::Schedule& sched, const schedule::Program& program);

}  // namespace chimera::runtime
