#pragma once
// The time of a training step as its throughput sees it: the whole cycle from the previous
// step's measurement to this one's. What follows a measurement (the reduction of the step's
// timings, the log line, the loop's tail) is charged to the next step, so that the steps' times
// add up to the run's time and tokens/s is its throughput, also where sharded weight gathers load
// the links while those reductions run. Work that is not part of any step (validation, a
// checkpoint save) is left out with exclude().
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

class StepCycle {
 public:
  // Seconds since the previous measure() (or construction), less what was excluded; starts the
  // next cycle.
  double measure() {
    const double seconds = clock_.seconds() - excluded_s_;
    clock_.reset();
    excluded_s_ = 0.0;
    return seconds;
  }
  // Leaves `seconds` of the current cycle out of its step's time.
  void exclude(double seconds) { excluded_s_ += seconds; }

 private:
  Stopwatch clock_;
  double excluded_s_ = 0.0;
};

}  // namespace chimera::runtime
