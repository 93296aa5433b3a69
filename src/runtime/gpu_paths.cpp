#include "gpu_paths.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <array>
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

GpuPaths choose_gpu_paths(MessagesMode messages, AllreduceMode allreduce, const GpuFacts& facts,
                          bool device_mpi_with_nccl) {
  GpuPaths p;
  if (messages == MessagesMode::Device) {
    CHIMERA_REQUIRE(facts.cuda_aware_mpi != CudaAwareMpi::No,
                    "runtime.messages = 'device' needs CUDA-aware MPI, and this MPI library says "
                    "it is not ({}): use runtime.messages = 'host' (or 'auto')",
                    facts.cuda_aware_source);
    p.messages = MessagePath::Direct;
  } else if (messages == MessagesMode::Host) {
    p.messages = MessagePath::HostStaged;
  } else {
    p.messages =
        facts.cuda_aware_mpi == CudaAwareMpi::Yes ? MessagePath::Direct : MessagePath::HostStaged;
  }
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
  }
  // CUDA-aware MPI and NCCL moving data between the same GPUs at once may deadlock (NCCL's
  // documentation, "NCCL and MPI"): a NCCL kernel holds its device until every peer has launched
  // it, and CUDA-aware MPI can make the same kind of wait across devices.
  std::string staged_why;  // why `auto` staged messages that could have been direct
  if (no_nccl.empty() && allreduce != AllreduceMode::Mpi && p.messages == MessagePath::Direct &&
      !device_mpi_with_nccl) {
    constexpr std::string_view kWhy =
        "device-buffer MPI and NCCL at the same time may deadlock (runtime.device_mpi_with_nccl "
        "= true allows it)";
    if (allreduce == AllreduceMode::Auto) {
      no_nccl = fmt::format("activations go through CUDA-aware MPI, and {}", kWhy);
    } else if (messages == MessagesMode::Auto) {
      p.messages = MessagePath::HostStaged;
      staged_why = fmt::format("; staged: gradient sums use NCCL, and {}", kWhy);
    } else {
      throw InputError(fmt::format(
          "runtime.messages = 'device' with runtime.allreduce = 'nccl': {}; choose one of them, "
          "or set runtime.device_mpi_with_nccl = true",
          kWhy));
    }
  }
  const GradSumPath mpi_path =
      p.messages == MessagePath::Direct ? GradSumPath::Mpi : GradSumPath::HostStagedMpi;
  if (allreduce == AllreduceMode::Mpi) {
    p.sums = mpi_path;
  } else {
    p.sums = no_nccl.empty() ? GradSumPath::Nccl : mpi_path;
  }
  p.reason = fmt::format(
      "activations: {} (runtime.messages = {}; MPI {}: {}{}); gradient sums: {} "
      "(runtime.allreduce = {}{})",
      to_string(p.messages), chimera::to_string(messages), to_string(facts.cuda_aware_mpi),
      facts.cuda_aware_source.empty() ? "not asked" : facts.cuda_aware_source, staged_why,
      to_string(p.sums), chimera::to_string(allreduce),
      no_nccl.empty() ? "" : fmt::format("; no NCCL: {}", no_nccl));
  return p;
}

CudaAwareness cuda_awareness(const std::optional<CudaAwareness>& library,
                             const comm::EnvLookup& env) {
  if (library) return *library;
  for (const std::string_view name : kCudaAwareVariables) {
    const char* v = env(std::string(name).c_str());
    if (v == nullptr) continue;
    const std::string_view value(v);
    if (value == "1") return {CudaAwareMpi::Yes, fmt::format("{}=1", name)};
    if (value == "0") return {CudaAwareMpi::No, fmt::format("{}=0", name)};
  }
  return {CudaAwareMpi::Unknown, "no MPI library call or variable says"};
}

CudaAwareness query_cuda_aware_mpi() {
  std::optional<CudaAwareness> library;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  // Built with CUDA support; the run-time answer says whether it is enabled.
  const int answer = MPIX_Query_cuda_support();
  library = CudaAwareness{answer == 1 ? CudaAwareMpi::Yes : CudaAwareMpi::No,
                          fmt::format("Open MPI's MPIX_Query_cuda_support() = {}", answer)};
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  library = CudaAwareness{CudaAwareMpi::No,
                          "Open MPI built without CUDA support (mpi-ext.h: "
                          "MPIX_CUDA_AWARE_SUPPORT = 0)"};
#endif
  return cuda_awareness(library, comm::process_env);
}

GpuFacts gather_gpu_facts(MPI_Comm world, backend::Backend& backend,
                          const schedule::Schedule& sched, const schedule::Program& program) {
  GpuFacts f;
  // Each fact as an int that MPI_MIN combines: any rank lacking something counts for all.
  const CudaAwareness mine = query_cuda_aware_mpi();
  std::array<int, 3> local{mine.value == CudaAwareMpi::No        ? 0
                           : mine.value == CudaAwareMpi::Unknown ? 1
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
  // The least CUDA-aware rank decides; the log names what said so on that rank.
  struct {
    int value;
    int rank;
  } least{local[0], 0};
  MPI_CHECK(MPI_Comm_rank(world, &least.rank));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &least, 1, MPI_2INT, MPI_MINLOC, world));
  std::array<char, 160> source{};
  mine.source.copy(source.data(), source.size() - 1);
  MPI_CHECK(MPI_Bcast(source.data(), static_cast<int>(source.size()), MPI_CHAR, least.rank, world));
  f.cuda_aware_source = source.data();
  if (least.rank != 0) f.cuda_aware_source += fmt::format(" on rank {}", least.rank);
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
