#pragma once
// Split backward over a given order (gen_chimera_zb.cpp, gen_bitpipe.cpp): a schedule of F and B
// ops becomes one of F, I and W ops whose F and I keep the given order and whose W ops fill the
// waits.
#include "chimera/schedule/ir.hpp"

namespace chimera::schedule::detail {

// The op costs the W placement assumes (one schedule serves every cost; these only steer where
// the W ops go).
struct FillCosts {
  double F = 1;
  double I = 1;
  double W = 1;
};

// `base`'s B ops become I ops in the same places (so the F and I order, deadlock-free with eager
// sends, stays so: nothing on another worker waits for a W). The W ops are placed by an
// event-driven list scheduler on `costs`: each worker, at its clock,
//   * runs its next F or I if its input has arrived;
//   * else runs a pending W (so the W fills the wait), preferring the stage with the fewest I ops
//     still to come on this worker, so that stage's gradient becomes final (and its eager sum
//     can start) as early as possible; oldest first within a stage;
//   * else idles until the input arrives.
// Before an F that would hold more than `cap` ops' activations on the worker (an F adds one, a W
// frees one), pending W ops run first. After the last I the remaining W ops run, stage by stage.
// The worker with the earliest clock decides next; a worker whose input's producer has not been
// placed yet counts as not ready. A cap below `base`'s own peak is met where W ops allow.
Schedule split_backward_filling_waits(const Schedule& base, int cap, const FillCosts& costs = {});

}  // namespace chimera::schedule::detail
