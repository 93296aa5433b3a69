#pragma once
// What the simulator says an emulated run (--compute emulate) measures per iteration: the
// schedule replayed with runtime.cost, and where runtime.network names the network, the
// planner's whole prediction of the layout (activation messages, gradient sums, the ranks of a
// host sharing its link), so that the step line's "(sim ...)" is the figure `chimera plan
// --predict` gives for the same layout and network.
#include "chimera/runtime/run_plan.hpp"

namespace chimera::runtime {

// `ranks_per_host`: the launcher's ranks on this rank's node (the planner's --ranks-per-host).
// InputError where runtime.network does not parse, or where a host's ranks do not divide
// parallel.stages (the planner places a host's ranks within one pipeline group).
double emulated_iteration_ms(const RunPlan& plan, int ranks_per_host);

// "for these costs", or "for these costs and runtime.network (...)": what the figure includes.
std::string emulated_prediction_basis(const RunPlan& plan, int ranks_per_host);

}  // namespace chimera::runtime
