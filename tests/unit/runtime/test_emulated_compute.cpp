#include <gtest/gtest.h>

#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"
#include "emulated_stage_compute.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

TEST(EmulatedStageCompute, WaitsTheCostAndTracksActivations) {
  schedule::Costs costs = schedule::Costs::forward_backward(4.0, 8.0);
  costs.W = 2.0;
  costs.I = 6.0;
  EmulatedStageCompute c(costs, 0.5, 16, {{0, 10, 100}, {3, 20, 300}}, 50, true);
  int polls = 0;
  c.set_progress([&] {
    ++polls;
    return true;  // requests outstanding: the op must keep polling
  });
  Stopwatch sw;
  c.forward(0, 0, nullptr, nullptr, nullptr, nullptr, 1.0F);  // halving: half of F = 2 ms
  c.forward(3, 1, nullptr, nullptr, nullptr, nullptr, 1.0F);
  EXPECT_GE(sw.ms(), 4.0);
  EXPECT_GT(polls, 0);
  EXPECT_EQ(c.peak_activation_bytes(), 400);
  c.backward(0, 0, nullptr, nullptr);
  c.backward_input(3, 1, nullptr, nullptr);
  c.backward_weight(3, 1);
  EXPECT_EQ(c.peak_activation_bytes(), 400);
  c.reset_peak_activation_bytes();
  EXPECT_EQ(c.peak_activation_bytes(), 0);
  EXPECT_THROW(c.backward(0, 5, nullptr, nullptr), Error);  // never forwarded
  const auto g = c.grad_buffers();
  ASSERT_EQ(g.size(), 3U);  // tied + two stages
  EXPECT_EQ(g[0].stage, -1);
  EXPECT_EQ(g[0].count, 50U);
  EXPECT_EQ(g[2].count, 20U);
}

TEST(EmulatedStageCompute, AnOpProgressesAtItsBlockBoundariesAsARealStageDoes) {
  // With nothing outstanding the op sleeps from boundary to boundary: a 4-block stage polls at
  // its start and after each of its first three blocks (the end is the executor's), a 1-block
  // stage only at its start.
  const schedule::Costs costs = schedule::Costs::forward_backward(20.0, 20.0);
  EmulatedStageCompute c(costs, 1.0, 16, {{0, 10, 100, 4}, {1, 10, 100, 1}}, 0, false);
  std::vector<double> polls;
  Stopwatch sw;
  c.set_progress([&] {
    polls.push_back(sw.ms());
    return false;
  });
  c.forward(0, 0, nullptr, nullptr, nullptr, nullptr, 1.0F);
  ASSERT_EQ(polls.size(), 4U);
  for (std::size_t i = 1; i < polls.size(); ++i) EXPECT_GE(polls[i], 5.0 * i - 0.5);
  EXPECT_GE(sw.ms(), 19.0);
  polls.clear();
  c.forward(1, 0, nullptr, nullptr, nullptr, nullptr, 1.0F);
  EXPECT_EQ(polls.size(), 1U);
}

}  // namespace
}  // namespace chimera::runtime
