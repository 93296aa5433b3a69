#pragma once
// The planner: every layout W x D = P, micro-batch size B, N = G / (W B) for a global batch G,
// every scheme and variant, with and without recomputation; predicted, kept when it fits in
// memory, ranked by throughput.
#include <string>
#include <string_view>
#include <vector>

#include "chimera/plan/predict.hpp"

namespace chimera::plan {

struct SchemeChoice {
  std::string scheme;
  std::string variant;     // chimera
  int pipes = 0;           // chimera: 2f
  int virtual_stages = 0;  // interleaved: v
};

// "gpipe", "chimera:doubling", "chimera:direct:4" (4 pipes), "interleaved:4" (v = 4).
SchemeChoice parse_scheme_choice(std::string_view text);
// What the planner tries by default: gpipe, 1f1b, gems, interleaved v=2 and v=4, chimera
// direct/doubling/halving, chimera with 4 and 8 pipes, zb-h1, zb-v, dualpipev, v-half, v-min.
std::vector<SchemeChoice> default_scheme_choices();

struct PlanRequest {
  int nodes = 0;         // P = W x D
  int global_batch = 0;  // G = W x N x B
  int max_micro_batch_size = 32;
  bool consider_recompute = true;
  bool shard_optimizer = false;  // every layout with sharded optimizer state (Layout)
  std::vector<SchemeChoice> schemes = default_scheme_choices();
};

struct PlanResult {
  std::vector<Prediction> ranked;  // layouts that fit in memory, fastest first
  int layouts = 0;                 // layouts tried
  int invalid = 0;                 // of them, without a valid schedule (e.g. Chimera with odd D)
  int over_memory = 0;             // of them, valid but too big for a device
  std::string first_invalid;       // an example of why a layout was invalid
};

// InputError when no layout exists at all (e.g. G not divisible by any W).
PlanResult plan(const PlanRequest& request, Predictor& predictor);

// The fastest layout of each scheme (Layout::scheme), fastest first.
std::vector<Prediction> best_per_scheme(const PlanResult& result);

// A few lines on why the winner wins: its time split into work, bubbles, p2p, exposed
// allreduce and optimizer against the best layout of every other scheme.
std::string explain(const PlanResult& result);

}  // namespace chimera::plan
