// How a GPU run moves activations and sums gradients (gpu_paths.hpp): the choice from the config
// and the facts of every rank, and the check that NCCL's one stream per rank cannot deadlock on
// the order in which a schedule's workers start their gradient sums. Pure logic: no GPU needed.
#include <gtest/gtest.h>

#include "chimera/core/error.hpp"
#include "chimera/runtime/gpu_paths.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"

namespace chimera::runtime {
namespace {

GpuFacts facts(CudaAwareMpi aware, bool nccl, bool shared = false, bool consistent = true) {
  return GpuFacts{aware, nccl, shared, consistent};
}

TEST(GpuPaths, AutoPrefersCudaAwareMpiAndNccl) {
  auto p = choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::Yes, true));
  EXPECT_EQ(p.messages, MessagePath::Direct);
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  p = choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::Unknown, true));
  EXPECT_EQ(p.messages, MessagePath::HostStaged) << "unknown CUDA-awareness must not be trusted";
  EXPECT_EQ(p.sums, GradSumPath::Nccl);
  p = choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::No, false));
  EXPECT_EQ(p.messages, MessagePath::HostStaged);
  EXPECT_EQ(p.sums, GradSumPath::HostStagedMpi);
  p = choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::Yes, false));
  EXPECT_EQ(p.sums, GradSumPath::Mpi);
  EXPECT_NE(p.reason.find("no NCCL"), std::string::npos) << p.reason;
}

TEST(GpuPaths, AutoFallsBackToMpiWhenNcclCouldNotWork) {
  EXPECT_EQ(choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::No, true, true)).sums,
            GradSumPath::HostStagedMpi);
  EXPECT_EQ(choose_gpu_paths("auto", "auto", facts(CudaAwareMpi::No, true, false, false)).sums,
            GradSumPath::HostStagedMpi);
}

TEST(GpuPaths, ExplicitChoicesAreHonouredOrRefusedWithTheReason) {
  EXPECT_EQ(choose_gpu_paths("host", "mpi", facts(CudaAwareMpi::Yes, true)).messages,
            MessagePath::HostStaged);
  EXPECT_EQ(choose_gpu_paths("host", "mpi", facts(CudaAwareMpi::Yes, true)).sums,
            GradSumPath::HostStagedMpi);
  EXPECT_EQ(choose_gpu_paths("device", "mpi", facts(CudaAwareMpi::Unknown, true)).sums,
            GradSumPath::Mpi);
  EXPECT_THROW(choose_gpu_paths("device", "auto", facts(CudaAwareMpi::No, true)), InputError);
  EXPECT_THROW(choose_gpu_paths("auto", "nccl", facts(CudaAwareMpi::Yes, false)), InputError);
  EXPECT_THROW(choose_gpu_paths("auto", "nccl", facts(CudaAwareMpi::Yes, true, true)), InputError);
  EXPECT_THROW(choose_gpu_paths("gpu", "auto", facts(CudaAwareMpi::Yes, true)), InputError);
  EXPECT_THROW(choose_gpu_paths("auto", "gloo", facts(CudaAwareMpi::Yes, true)), InputError);
}

// Two workers holding both stages, starting their sums in the given orders.
bool consistent(std::vector<int> order0, std::vector<int> order1) {
  schedule::Schedule s;
  s.workers = 2;
  s.stages = 2;
  s.placement = {{0, 1}, {1, 0}};
  schedule::Program p;
  for (const auto& order : {order0, order1}) {
    p.workers.emplace_back();
    for (const int stage : order) {
      schedule::Instr i;
      i.kind = schedule::InstrKind::GradReady;
      i.stage = stage;
      p.workers.back().push_back(i);
    }
  }
  return sum_order_consistent(s, p);
}

TEST(SumOrder, OppositeOrdersOnTwoWorkersAreACycle) {
  EXPECT_TRUE(consistent({0, 1}, {0, 1}));
  EXPECT_FALSE(consistent({0, 1}, {1, 0}));
}

// Chimera's two pipelines finish the stages of a worker in the same order on both of its
// workers, so its sums can use NCCL; GEMS's alternating pipelines start them in opposite orders
// on the two workers that share a pair of stages, so it falls back to MPI (no deadlock).
TEST(SumOrder, EverySchemeAtFourStages) {
  const std::vector<std::pair<std::string, bool>> expected = {
      {"gpipe", true},       {"1f1b", true},    {"gems", false},
      {"interleaved", true}, {"chimera", true}, {"zb-h1", true}};
  for (const auto& [scheme, consistent_order] : expected) {
    schedule::ScheduleRequest r;
    r.scheme = scheme;
    r.stages = 4;
    r.micro_batches = 8;
    const auto sched = schedule::make_schedule(r);
    EXPECT_EQ(sum_order_consistent(sched, schedule::lower(sched)), consistent_order) << scheme;
  }
}

}  // namespace
}  // namespace chimera::runtime
