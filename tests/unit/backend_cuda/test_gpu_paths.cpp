// How a GPU run moves activations and sums gradients (gpu_paths.hpp): the choice from the config
// and the facts of every rank. Pure logic: no GPU needed.
#include <gtest/gtest.h>

#include "chimera/core/error.hpp"
#include "gpu_paths.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

GpuFacts facts(CudaAwareMpi aware, bool nccl, bool shared = false, bool consistent = true) {
  return GpuFacts{aware, nccl, shared, consistent};
}

// The config's words, read as the config reads them: a word that is no choice fails there.
GpuPaths choose(std::string_view messages, std::string_view allreduce, const GpuFacts& f) {
  return choose_gpu_paths(parse_enum<MessagesMode>(messages), parse_enum<AllreduceMode>(allreduce),
                          f);
}

TEST(GpuPaths, AutoPrefersCudaAwareMpiAndNccl) {
  auto p = choose("auto", "auto", facts(CudaAwareMpi::Yes, true));
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
  EXPECT_THROW(choose("auto", "gloo", facts(CudaAwareMpi::Yes, true)), InputError);
}

// Two workers holding both stages, starting their sums in the given orders.
}  // namespace
}  // namespace chimera::runtime
