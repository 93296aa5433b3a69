#include <gtest/gtest.h>

#include "chimera/comm/topology.hpp"
#include "chimera/core/error.hpp"

namespace chimera::comm {
namespace {

schedule::Schedule chimera_like(int d) {
  schedule::Schedule s;
  s.scheme = "chimera";
  s.workers = d;
  s.stages = d;
  s.placement.resize(2);
  for (int i = 0; i < d; ++i) {
    s.placement[0].push_back(i);
    s.placement[1].push_back(d - 1 - i);
  }
  return s;
}

TEST(Topology, ChimeraWorkersHoldTwoMirroredStages) {
  const auto sched = chimera_like(4);
  const auto t = Topology::make(8, 6, sched);  // W=2, D=4: rank 6 = replica 1, worker 2
  EXPECT_EQ(t.replicas, 2);
  EXPECT_EQ(t.replica, 1);
  EXPECT_EQ(t.worker, 2);
  EXPECT_EQ(t.held, (std::vector<int>{1, 2}));
  EXPECT_FALSE(t.holds_tied());
  EXPECT_EQ(t.holders[0], (std::vector<int>{0, 3}));
  EXPECT_EQ(t.owner_rank(2), 1);  // replica 0, lowest holder worker 1
  EXPECT_FALSE(t.owns(2));
  const auto t0 = Topology::make(8, 3, sched);
  EXPECT_EQ(t0.held, (std::vector<int>{0, 3}));
  EXPECT_TRUE(t0.holds_tied());
}

TEST(Topology, InterleavedWorkerHoldsEveryDthStage) {
  schedule::Schedule s;
  s.scheme = "interleaved";
  s.workers = 2;
  s.stages = 6;
  s.placement = {{0, 1, 0, 1, 0, 1}};
  const auto t = Topology::make(2, 1, s);
  EXPECT_EQ(t.held, (std::vector<int>{1, 3, 5}));
  EXPECT_TRUE(t.holds_tied());  // the last stage
  EXPECT_TRUE(t.owns(5));
}

TEST(Topology, WorldMustBeMultipleOfGroup) {
  EXPECT_THROW(Topology::make(6, 0, chimera_like(4)), InputError);
  try {
    Topology::make(6, 0, chimera_like(4));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of the pipeline group size D=4"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace chimera::comm
