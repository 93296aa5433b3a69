// How a GPU run moves activations and sums gradients (gpu_paths.hpp): the choice from the config
// and the facts of every rank. Pure logic: no GPU needed.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "chimera/core/error.hpp"
#include "gpu_paths.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

GpuFacts facts(CudaAwareMpi aware, bool nccl, bool shared = false, bool consistent = true) {
  GpuFacts f;
  f.cuda_aware_mpi = aware;
  f.device_groups = nccl;
  f.devices_shared = shared;
  f.sum_order_consistent = consistent;
  f.cuda_aware_source = "a test's word";
  return f;
}

// The config's words, read as the config reads them: a word that is no choice fails there.
GpuPaths choose(std::string_view messages, std::string_view allreduce, const GpuFacts& f) {
  return choose_gpu_paths(parse_enum<MessagesMode>(messages), parse_enum<AllreduceMode>(allreduce),
                          f);
}

TEST(GpuPaths, AutoPrefersCudaAwareMpiAndNcclButNeverBothAtOnce) {
  // CUDA-aware MPI and NCCL: one transport for both, device-buffer MPI.
  auto p = choose("auto", "auto", facts(CudaAwareMpi::Yes, true));
  EXPECT_EQ(p.messages, MessagePath::Direct);
  EXPECT_EQ(p.sums, GradSumPath::Mpi);
  EXPECT_NE(p.reason.find("runtime.device_mpi_with_nccl"), std::string::npos) << p.reason;
  // The documented setting allows both at once.
  p = choose_gpu_paths(MessagesMode::Auto, AllreduceMode::Auto, facts(CudaAwareMpi::Yes, true),
                       true);
  EXPECT_EQ(p.messages, MessagePath::Direct);
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  p = choose("auto", "auto", facts(CudaAwareMpi::Unknown, true));
  EXPECT_EQ(p.messages, MessagePath::HostStaged) << "unknown CUDA-awareness must not be trusted";
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  p = choose("auto", "auto", facts(CudaAwareMpi::No, false));
  EXPECT_EQ(p.messages, MessagePath::HostStaged);
  EXPECT_EQ(p.sums, GradSumPath::HostStagedMpi);
  p = choose("auto", "auto", facts(CudaAwareMpi::Yes, false));
  EXPECT_EQ(p.sums, GradSumPath::Mpi);
  EXPECT_NE(p.reason.find("no NCCL"), std::string::npos) << p.reason;
}

TEST(GpuPaths, AutoFallsBackToMpiWhenNcclCouldNotWork) {
  EXPECT_EQ(choose("auto", "auto", facts(CudaAwareMpi::No, true, true)).sums,
            GradSumPath::HostStagedMpi);
  EXPECT_EQ(choose("auto", "auto", facts(CudaAwareMpi::No, true, false, false)).sums,
            GradSumPath::HostStagedMpi);
}

TEST(GpuPaths, ExplicitChoicesAreHonouredOrRefusedWithTheReason) {
  EXPECT_EQ(choose("host", "mpi", facts(CudaAwareMpi::Yes, true)).messages,
            MessagePath::HostStaged);
  EXPECT_EQ(choose("host", "mpi", facts(CudaAwareMpi::Yes, true)).sums, GradSumPath::HostStagedMpi);
  EXPECT_EQ(choose("device", "mpi", facts(CudaAwareMpi::Unknown, true)).sums, GradSumPath::Mpi);
  EXPECT_THROW(choose("device", "auto", facts(CudaAwareMpi::No, true)), InputError);
  EXPECT_THROW(choose("auto", "nccl", facts(CudaAwareMpi::Yes, false)), InputError);
  EXPECT_THROW(choose("auto", "nccl", facts(CudaAwareMpi::Yes, true, true)), InputError);
  EXPECT_THROW(choose("gpu", "auto", facts(CudaAwareMpi::Yes, true)), InputError);
  // NCCL asked for: auto messages are staged rather than sent from device buffers alongside.
  auto p = choose("auto", "nccl", facts(CudaAwareMpi::Yes, true));
  EXPECT_EQ(p.messages, MessagePath::HostStaged);
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  EXPECT_NE(p.reason.find("staged: gradient sums use NCCL"), std::string::npos) << p.reason;
  // Both asked for: refused, naming the setting that allows it.
  try {
    choose("device", "nccl", facts(CudaAwareMpi::Yes, true));
    ADD_FAILURE() << "device messages with NCCL sums were accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.device_mpi_with_nccl = true"), std::string::npos)
        << e.what();
  }
  p = choose_gpu_paths(MessagesMode::Device, AllreduceMode::Nccl, facts(CudaAwareMpi::Yes, true),
                       true);
  EXPECT_EQ(p.messages, MessagePath::Direct);
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  EXPECT_THROW(choose("auto", "gloo", facts(CudaAwareMpi::Yes, true)), InputError);
}

// The environment as a map, for cuda_awareness.
comm::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(CudaAwareness, EveryCrayAndMvapichVariableIsReadAndNamedInTheAnswer) {
  for (const std::string_view name : kCudaAwareVariables) {
    const CudaAwareness yes = cuda_awareness(std::nullopt, env_of({{std::string(name), "1"}}));
    EXPECT_EQ(yes.value, CudaAwareMpi::Yes) << name;
    EXPECT_EQ(yes.source, std::string(name) + "=1");
    EXPECT_EQ(cuda_awareness(std::nullopt, env_of({{std::string(name), "0"}})).value,
              CudaAwareMpi::No)
        << name;
    EXPECT_EQ(cuda_awareness(std::nullopt, env_of({{std::string(name), "yes"}})).value,
              CudaAwareMpi::Unknown)
        << name << ": only 0 and 1 are answers";
  }
  // Piz Daint's job script (Cray XC) sets this one only.
  EXPECT_EQ(cuda_awareness(std::nullopt, env_of({{"MPICH_RDMA_ENABLED_CUDA", "1"}})).value,
            CudaAwareMpi::Yes);
  const CudaAwareness none = cuda_awareness(std::nullopt, env_of({}));
  EXPECT_EQ(none.value, CudaAwareMpi::Unknown);
  EXPECT_FALSE(none.source.empty());
}

TEST(CudaAwareness, TheLibrarysOwnAnswerComesFirstAndTheLogNamesIt) {
  const CudaAwareness library{CudaAwareMpi::No, "Open MPI's MPIX_Query_cuda_support() = 0"};
  const CudaAwareness a = cuda_awareness(library, env_of({{"MPICH_GPU_SUPPORT_ENABLED", "1"}}));
  EXPECT_EQ(a.value, CudaAwareMpi::No);
  EXPECT_EQ(a.source, library.source);
  GpuFacts f = facts(CudaAwareMpi::No, true);
  f.cuda_aware_source = a.source;
  const GpuPaths p = choose("auto", "auto", f);
  EXPECT_NE(p.reason.find(library.source), std::string::npos) << p.reason;
}

TEST(CudaAwareness, ThisBuildsMpiLibraryAnswersWithItsSource) {
  const CudaAwareness a = query_cuda_aware_mpi();
  EXPECT_FALSE(a.source.empty());
#if __has_include(<mpi-ext.h>)
  // Open MPI: its mpi-ext.h decides, never the environment.
  EXPECT_NE(a.source.find("Open MPI"), std::string::npos) << a.source;
  EXPECT_NE(a.value, CudaAwareMpi::Unknown);
#endif
}
}  // namespace
}  // namespace chimera::runtime
