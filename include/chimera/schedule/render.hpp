#pragma once
// Human- and tool-readable views of a simulated schedule: the paper-style worker x time grid, a
// CSV row per worker, an SVG Gantt chart, and the comparison table over all schemes.
#include <string>
#include <vector>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::schedule {

// The timeline as the paper's figures draw it: the simulator's, except that an op with no input
// (a forward at a pipe's first stage: a micro-batch entering) starts as late as it can without
// delaying any other op, i.e. just in time. The runtime may start it earlier; no other op moves.
std::vector<std::vector<OpSpan>> display_timeline(const Schedule& schedule, const SimResult& result,
                                                  const Costs& costs);

// Rows "P0  F0d0 .    F1d0 ...": one column per time quantum (the largest power of two that
// divides every start and end), an op spanning several columns continues with '-', '.' is idle.
// Followed by summary lines (makespan, bubble ratio, idle, peak activations, weight copies).
std::string render_grid(const Schedule& schedule, const SimResult& result, const Costs& costs);

// Header plus one row per worker: worker, stages held, ops, busy, idle, peak activations, weight
// copies, and the op order as space-separated labels.
std::string render_csv(const Schedule& schedule, const SimResult& result);

// A Gantt chart: one row per worker, forward / backward / I / W colored, idle grey, and each
// stage's gradient allreduce in a thin lane under the workers that hold it.
std::string render_svg(const Schedule& schedule, const SimResult& result, const Costs& costs);

// One row per scheme (and chimera variant) for D stages and N micro-batches: makespan and bubble
// ratio with F = B and with B = 2F, peak activations per worker (min-max), weight copies.
// Schemes that do not accept (D, N) say why. `virtual_stages` is interleaved's v.
std::string render_comparison(int D, int N, int virtual_stages);

}  // namespace chimera::schedule
