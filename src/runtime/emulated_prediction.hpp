#pragma once
// What the simulator says an emulated run (--compute emulate) measures per iteration: the
// schedule replayed with runtime.cost, and where runtime.network names the network, the
// planner's whole prediction of the layout (activation messages, gradient sums, the ranks of a
// host sharing its link), so that the step line's "(sim ...)" is the figure `chimera plan
// --predict` gives for the same layout and network.
#include <string>

#include "chimera/runtime/run_plan.hpp"

namespace chimera::runtime {

// The simulator's iteration time and what it includes: "for these costs", or "for these costs
// and runtime.network (...)".
struct IterationPrediction {
  double ms = 0.0;
  std::string basis;
};

// `ranks_per_host`: the launcher's ranks on this rank's node (the planner's --ranks-per-host).
// InputError where runtime.network does not parse, or where a host's ranks do not divide
// parallel.stages (the planner places a host's ranks within one pipeline group).
IterationPrediction predict_emulated_iteration(const RunPlan& plan, int ranks_per_host);

}  // namespace chimera::runtime
