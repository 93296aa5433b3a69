// The watchdog's limit derived from the run (step_watchdog.hpp): 600 s before a step is timed,
// then max(120 s, 20 x the median step after the first), read by every copy of a wait policy.
#include <gtest/gtest.h>

#include "step_watchdog.hpp"

namespace chimera::runtime {
namespace {

TEST(StepWatchdog, AutoStartsAtTenMinutesAndFollowsTheMedianAfterWarmUp) {
  StepWatchdog w(kWatchdogAuto);
  comm::WaitPolicy policy;
  w.apply(policy);
  const comm::WaitPolicy copy = policy;  // transports hold copies
  EXPECT_DOUBLE_EQ(copy.watchdog_limit_s(), 600.0);
  EXPECT_DOUBLE_EQ(w.step_limit_s(), 750.0);
  w.step_done(30.0);  // warm-up alone: it counts until another step is known
  EXPECT_DOUBLE_EQ(copy.watchdog_limit_s(), 600.0);
  w.step_done(1.0);  // the first step is left out now
  EXPECT_DOUBLE_EQ(copy.watchdog_limit_s(), 120.0);
  w.step_done(9.0);
  w.step_done(8.0);  // median of 1, 9, 8 after warm-up: 8 s
  EXPECT_DOUBLE_EQ(copy.watchdog_limit_s(), 160.0);
  w.step_done(10.0);  // of 1, 9, 8, 10: (8 + 9) / 2
  EXPECT_DOUBLE_EQ(copy.watchdog_limit_s(), 170.0);
  EXPECT_DOUBLE_EQ(w.step_limit_s(), 1.25 * 170.0);
}

TEST(StepWatchdog, ShortStepsKeepTheFloor) {
  StepWatchdog w(kWatchdogAuto);
  for (int i = 0; i < 10; ++i) w.step_done(0.05);
  EXPECT_DOUBLE_EQ(w.derived_s(), 120.0);
}

TEST(StepWatchdog, AnExplicitLimitBoundsWaitsAndZeroTurnsEverythingOff) {
  StepWatchdog fixed(2.0);
  comm::WaitPolicy policy;
  fixed.apply(policy);
  fixed.step_done(1.0);
  fixed.step_done(1.0);
  EXPECT_DOUBLE_EQ(policy.watchdog_limit_s(), 2.0);
  EXPECT_DOUBLE_EQ(fixed.step_limit_s(), 150.0);  // the step keeps the derived bound

  StepWatchdog off(0.0);
  off.apply(policy);
  off.step_done(1.0);
  EXPECT_DOUBLE_EQ(policy.watchdog_limit_s(), 0.0);
  EXPECT_DOUBLE_EQ(off.step_limit_s(), 0.0);
  EXPECT_NE(off.describe().find("off"), std::string::npos);
}

}  // namespace
}  // namespace chimera::runtime
