// Chimera with split backward ("chimera-zb"): Chimera's two pipelines (the paper's pair: worker
// p holds stage p of the down pipe and stage D-1-p of the up pipe) whose backwards are split into
// I (input gradient, on the critical path) and W (weight gradient, free to move), with the W ops
// filling the bubbles, as zero-bubble schedules do for one pipeline.
//
// Construction. The F and I ops keep the order of Chimera direct (its B ops become I ops): that
// order is deadlock-free, and a W, which nothing on another worker waits for, may go anywhere
// after its own I without changing that. The W ops are placed by an event-driven list scheduler
// on the op costs F = I = W = 1 (F:B = 1:2 with I = W = B/2; split_backward.hpp), holding at most
// `max_in_flight` chunk-activations per worker (simulate.hpp: an F adds a micro-batch through a
// stage, two chunks, its W frees them).
//
// Memory: Chimera direct holds at most D micro-batches per worker; deferring W ops holds more,
// up to max_in_flight / 2 (default 2D chunks, so never more than Chimera). A cap below Chimera's
// own peak on some worker cannot be met by W ops alone and is refused.
#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "generator_util.hpp"
#include "split_backward.hpp"

namespace chimera::schedule {

Schedule chimera_zb(int D, int N, int max_in_flight) {
  detail::require_pipeline("chimera-zb", D, N);
  const Schedule base = chimera(D, N, "direct", 2);  // checks D even, N a multiple of D
  // max_in_flight counts chunk-activations (simulate.hpp); an F here holds a stage, two chunks.
  const int cap = max_in_flight == 0 ? D : static_cast<int>(from_chunks(max_in_flight));
  CHIMERA_REQUIRE(cap >= 1,
                  "chimera-zb: max_in_flight = {} chunk-activations must be >= 2 (0 = 2D)",
                  max_in_flight);
  // Chimera's own peak, which W ops cannot lower.
  const SimResult chimera_sim = simulate(base, Costs::forward_backward(1, 1));
  const double chimera_peak =
      *std::max_element(chimera_sim.peak_activations.begin(), chimera_sim.peak_activations.end());
  CHIMERA_REQUIRE(cap >= chimera_peak,
                  "chimera-zb with D={}, N={} needs max_in_flight >= {} (Chimera's own peak of "
                  "chunk-activations held on one worker; got {})",
                  D, N, to_chunks(chimera_peak), max_in_flight);

  Schedule s = detail::split_backward_filling_waits(base, cap);
  s.scheme = "chimera-zb";
  s.variant = "";
  return s;
}

}  // namespace chimera::schedule
