// A step's time is its whole cycle: what follows one measurement belongs to the next step, and
// excluded work (validation, saves) to none.
#include <gtest/gtest.h>

#include "chimera/core/timer.hpp"
#include "step_cycle.hpp"

namespace chimera::runtime {
namespace {

TEST(StepCycle, TheTailAfterAMeasurementCountsInTheNextStep) {
  StepCycle cycle;
  sleep_seconds(0.02);          // the first step's body
  const Stopwatch independent;  // from before the measurement: it spans the whole next cycle
  const double first = cycle.measure();
  EXPECT_GE(first, 0.02);
  sleep_seconds(0.03);  // what follows a measurement: the timings' reduction, the log line
  sleep_seconds(0.02);  // the next step's body
  const double second = cycle.measure();
  const double wall = independent.seconds();
  // A clock restarted at the top of the next step would give about 0.02 here.
  EXPECT_GE(second, 0.05);
  EXPECT_LE(second, wall);
}

TEST(StepCycle, ExcludedWorkIsInNoStep) {
  const Stopwatch independent;  // from before the cycle: it spans all of it
  StepCycle cycle;
  sleep_seconds(0.02);
  cycle.exclude(0.015);  // e.g. a validation pass that took 15 ms
  const double step = cycle.measure();
  const double wall = independent.seconds();
  EXPECT_LE(step, wall - 0.015);
  EXPECT_GE(step, 0.02 - 0.015);
  // The exclusion ends with its step.
  sleep_seconds(0.01);
  EXPECT_GE(cycle.measure(), 0.01);
}

}  // namespace
}  // namespace chimera::runtime
