#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/stage_sum.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

using chimera::testing::world_rank;
using chimera::testing::world_size;

// Chimera placement with D = 2 when the world is even, else a one-worker pipeline.
schedule::Schedule test_schedule() {
  schedule::Schedule s;
  s.scheme = "chimera";
  const int d = world_size() % 2 == 0 ? 2 : 1;
  s.workers = d;
  s.stages = d;
  s.placement =
      d == 2 ? std::vector<std::vector<int>>{{0, 1}, {1, 0}} : std::vector<std::vector<int>>{{0}};
  return s;
}

int comm_size(MPI_Comm c) {
  if (c == MPI_COMM_NULL) return 0;
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

TEST(Communicators, GroupsHaveTheRightMembers) {
  const auto sched = test_schedule();
  const auto topo = Topology::make(world_size(), world_rank(), sched);
  const Communicators comms(topo, MPI_COMM_WORLD);
  EXPECT_EQ(comm_size(comms.pipeline()), sched.workers);
  int pipe_rank = -1;
  MPI_Comm_rank(comms.pipeline(), &pipe_rank);
  EXPECT_EQ(pipe_rank, topo.worker);
  for (int s = 0; s < sched.stages; ++s) {
    // Chimera: every worker of a D=2 group holds both stages, so 2W ranks sum each stage.
    EXPECT_EQ(comm_size(comms.stage(s)), world_size()) << "stage " << s;
  }
  EXPECT_EQ(comm_size(comms.tied()), world_size());
}

// Two stage gradients per rank, started in opposite orders on neighbouring ranks: separate
// communicators per stage mean no common order is needed, and the sums must be exact.
TEST(StageSums, SumsEachStageOverItsHoldersInAnyStartOrder) {
  const auto sched = test_schedule();
  const auto topo = Topology::make(world_size(), world_rank(), sched);
  const Communicators comms(topo, MPI_COMM_WORLD);
  StageSums sync;
  std::vector<std::vector<float>> grads;
  for (int s : topo.held) grads.push_back(std::vector<float>(1000, float(world_rank() + 10 * s)));
  std::vector<int> keys;
  for (std::size_t i = 0; i < topo.held.size(); ++i) {
    keys.push_back(sync.add(GradBuffer{"stage", topo.held[i], grads[i].data(), grads[i].size()},
                            comms.stage(topo.held[i])));
  }
  if (world_rank() % 2 == 1) std::reverse(keys.begin(), keys.end());
  for (int k : keys) sync.start(k);
  sync.wait_all(WaitPolicy{});
  const int n = world_size();
  const float rank_sum = float(n * (n - 1) / 2);
  for (std::size_t i = 0; i < topo.held.size(); ++i) {
    const float expect = rank_sum + float(10 * topo.held[i] * n);
    EXPECT_EQ(grads[i][0], expect);
    EXPECT_EQ(grads[i][999], expect);
    EXPECT_GE(sync.timings()[i].done_s, sync.timings()[i].start_s);
    EXPECT_GT(sync.timings()[i].start_s, 0.0);
  }
}

TEST(StageSums, WaitAllRejectsAGradientNeverMarkedReady) {
  std::vector<float> g(4, 1.0F);
  StageSums sync;
  sync.add(GradBuffer{"stage 0", 0, g.data(), g.size()}, MPI_COMM_SELF);
  EXPECT_THROW(sync.wait_all(WaitPolicy{}), Error);
}

}  // namespace
}  // namespace chimera::comm
