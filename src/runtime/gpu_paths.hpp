#pragma once
// The paths of a GPU run (docs/cuda.md): how activation messages cross ranks (MessagePath) and how
// gradients are summed (GradSumPath), chosen from runtime.messages, runtime.allreduce and facts
// gathered from every rank.
//  - Mpi:           MPI_Iallreduce on the gradient buffers themselves (CUDA-aware MPI);
//  - HostStagedMpi: MPI_Iallreduce on page-locked host copies of them;
//  - Nccl:          NCCL groups on the backend's collective stream.
// With parallel.shard_optimizer, Nccl runs the reduce-scatter and all-gather on the device group,
// and both MPI paths stage them through host memory (GradSums::make_sharded).
#include <mpi.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/local_rank.hpp"  // EnvLookup
#include "chimera/core/config.hpp"
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"
#include "message_staging.hpp"

namespace chimera::runtime {

enum class GradSumPath { Mpi, HostStagedMpi, Nccl };
std::string_view to_string(GradSumPath path);

// Whether MPI reads and writes GPU memory itself.
enum class CudaAwareMpi { Yes, No, Unknown };

// That answer, and what gave it, for the log: "MPIX_Query_cuda_support() = 1",
// "MPICH_RDMA_ENABLED_CUDA=1", "no MPI library call or variable says".
struct CudaAwareness {
  CudaAwareMpi value = CudaAwareMpi::Unknown;
  std::string source;
};

// What decides the paths of a GPU run, gathered from every rank.
struct GpuFacts {
  CudaAwareMpi cuda_aware_mpi = CudaAwareMpi::Unknown;
  bool device_groups = false;        // the backend has NCCL
  bool devices_shared = false;       // two ranks of one node compute on one GPU (NCCL refuses)
  bool sum_order_consistent = true;  // schedule::sum_order_consistent (schedule/sum_order.hpp)
  std::string cuda_aware_source;     // what decided cuda_aware_mpi (on the least aware rank)
};

struct GpuPaths {
  MessagePath messages = MessagePath::Direct;
  GradSumPath sums = GradSumPath::Mpi;
  std::string reason;  // one line for the log: why these paths
};

// runtime.messages (auto | device | host) and runtime.allreduce (auto | nccl | mpi) against the
// facts. InputError for a request the facts rule out, naming the fact.
// Device-buffer MPI messages and NCCL sums never run together (NCCL's documentation: CUDA-aware
// MPI and NCCL transfers between the same GPUs at the same time may deadlock) unless
// `device_mpi_with_nccl` (runtime.device_mpi_with_nccl) allows it: `auto` gives up one of them,
// and asking for both explicitly is an InputError that names that setting.
GpuPaths choose_gpu_paths(MessagesMode messages, AllreduceMode allreduce, const GpuFacts& facts,
                          bool device_mpi_with_nccl = false);

// The variables MPI libraries without a query of their own are configured by, in the order they
// are read; "1" means CUDA-aware, "0" not, anything else is no answer.
inline constexpr std::array<std::string_view, 3> kCudaAwareVariables{
    "MPICH_GPU_SUPPORT_ENABLED",  // Cray MPICH on HPE Cray EX
    "MPICH_RDMA_ENABLED_CUDA",    // Cray MPICH on Cray XC (Piz Daint)
    "MV2_USE_CUDA",               // MVAPICH2-GDR
};

// The answer: the library's own where it has one (`library`: Open MPI's mpi-ext.h), else the
// first of kCudaAwareVariables set to 0 or 1, else Unknown.
CudaAwareness cuda_awareness(const std::optional<CudaAwareness>& library,
                             const comm::EnvLookup& env);
// What the MPI library this program is built with says: Open MPI's MPIX_Query_cuda_support()
// (No where Open MPI was built without CUDA), else the environment as above.
CudaAwareness query_cuda_aware_mpi();
// Collective over `world`: every rank's facts combined (any rank lacking NCCL or sharing a device
// counts for all).
GpuFacts gather_gpu_facts(MPI_Comm world, backend::Backend& backend,
                          const schedule::Schedule& sched, const schedule::Program& program);

}  // namespace chimera::runtime
