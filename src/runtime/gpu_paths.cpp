#include "gpu_paths.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <array>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/node_comm.hpp"
#include "chimera/core/error.hpp"
#include "chimera/schedule/sum_order.hpp"

namespace chimera::runtime {

std::string_view to_string(GradSumPath path) {
  switch (path) {
    case GradSumPath::Mpi:
      return "MPI_Iallreduce on GPU memory";
    case GradSumPath::HostStagedMpi:
      return "MPI_Iallreduce on host copies";
    case GradSumPath::Nccl:
      return "NCCL";
  }
  return "?";
}

namespace {

std::string_view to_string(CudaAwareMpi a) {
  return a == CudaAwareMpi::Yes  ? "CUDA-aware"
         : a == CudaAwareMpi::No ? "not CUDA-aware"
                                 : "unknown";
}

}  // namespace

GpuPaths choose_gpu_paths(MessagesMode messages, AllreduceMode allreduce, const GpuFacts& facts) {
  GpuPaths p;
  if (messages == MessagesMode::Device) {
    CHIMERA_REQUIRE(facts.cuda_aware_mpi != CudaAwareMpi::No,
                    "runtime.messages = 'device' needs CUDA-aware MPI, and this MPI library says "
                    "it is not: use runtime.messages = 'host' (or 'auto')");
    p.messages = MessagePath::Direct;
  } else if (messages == MessagesMode::Host) {
    p.messages = MessagePath::HostStaged;
  } else {
    p.messages =
        facts.cuda_aware_mpi == CudaAwareMpi::Yes ? MessagePath::Direct : MessagePath::HostStaged;
  }
  const GradSumPath mpi_path =
      p.messages == MessagePath::Direct ? GradSumPath::Mpi : GradSumPath::HostStagedMpi;
  std::string no_nccl;  // why NCCL cannot be used ("" if it can)
  if (!facts.device_groups) {
    no_nccl = "this build (or a rank's backend) has no NCCL";
  } else if (facts.devices_shared) {
    no_nccl = "two ranks of one node compute on one GPU, which NCCL refuses";
  } else if (!facts.sum_order_consistent) {
    no_nccl =
        "the schedule's ranks start their gradient sums in orders that could deadlock one "
        "NCCL stream";
  }
  if (allreduce == AllreduceMode::Nccl) {
    CHIMERA_REQUIRE(no_nccl.empty(), "runtime.allreduce = 'nccl': {}; use 'mpi' or 'auto'",
                    no_nccl);
    p.sums = GradSumPath::Nccl;
  } else if (allreduce == AllreduceMode::Mpi) {
    p.sums = mpi_path;
  } else {
    p.sums = no_nccl.empty() ? GradSumPath::Nccl : mpi_path;
  }
  p.reason = fmt::format(
      "activations: {} (runtime.messages = {}, MPI {}); gradient sums: {} (runtime.allreduce = "
      "{}{})",
      to_string(p.messages), chimera::to_string(messages), to_string(facts.cuda_aware_mpi),
      to_string(p.sums), chimera::to_string(allreduce),
      no_nccl.empty() ? "" : fmt::format("; no NCCL: {}", no_nccl));
  return p;
}

CudaAwareMpi query_cuda_aware_mpi() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  // Built with CUDA support; the run-time answer says whether it is enabled.
  return MPIX_Query_cuda_support() == 1 ? CudaAwareMpi::Yes : CudaAwareMpi::No;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  return CudaAwareMpi::No;  // Open MPI built without CUDA support
#else
  auto set_to_1 = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "1") == 0;
  };
  if (set_to_1("MPICH_GPU_SUPPORT_ENABLED") || set_to_1("MV2_USE_CUDA")) return CudaAwareMpi::Yes;
  return CudaAwareMpi::Unknown;
#endif
}

GpuFacts gather_gpu_facts(MPI_Comm world, backend::Backend& backend,
                          const schedule::Schedule& sched, const schedule::Program& program) {
  GpuFacts f;
  // Each fact as an int that MPI_MIN combines: any rank lacking something counts for all.
  const CudaAwareMpi mine = query_cuda_aware_mpi();
  std::array<int, 3> local{mine == CudaAwareMpi::No        ? 0
                           : mine == CudaAwareMpi::Unknown ? 1
                                                           : 2,
                           backend.has_device_groups() ? 1 : 0, 1};
  // Device ids of the node's ranks: an id seen twice means a shared GPU.
  const comm::NodeComm node(world);
  const int node_size = node.size();
  constexpr int kIdChars = 64;
  std::array<char, kIdChars> id{};
  const std::string device = backend.device_id();
  std::memcpy(id.data(), device.data(), std::min<std::size_t>(device.size(), kIdChars - 1));
  std::vector<char> ids(static_cast<std::size_t>(node_size) * kIdChars);
  MPI_CHECK(
      MPI_Allgather(id.data(), kIdChars, MPI_CHAR, ids.data(), kIdChars, MPI_CHAR, node.get()));
  std::set<std::string> seen;
  for (int r = 0; r < node_size; ++r) {
    if (!seen.insert(std::string(&ids[static_cast<std::size_t>(r) * kIdChars])).second) {
      local[2] = 0;
    }
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, local.data(), 3, MPI_INT, MPI_MIN, world));
  f.cuda_aware_mpi = local[0] == 0   ? CudaAwareMpi::No
                     : local[0] == 1 ? CudaAwareMpi::Unknown
                                     : CudaAwareMpi::Yes;
  f.device_groups = local[1] == 1;
  f.devices_shared = local[2] == 0;
  f.sum_order_consistent =
      schedule::sum_order_consistent(sched, program);  // the same on every rank
  return f;
}

}  // namespace chimera::runtime
