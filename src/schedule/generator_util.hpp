#pragma once
// Helpers the generators share: parameter rules, the common Schedule shell, and turning ops
// laid out on time slots into per-worker program order.
#include <cstdint>
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule::detail {

// D >= 2, N >= 1 and a size the library can hold; throws InputError naming the rule.
void require_pipeline(const std::string& scheme, int D, int N, int stages_per_worker = 1,
                      int min_stages = 2);

// A schedule with everything but the ops: `pipes` placements given, micro-batches split evenly
// over the pipes in order (the first micro_batches/pipes run on pipe 0, ...).
Schedule make_shell(std::string scheme, std::string variant, int D, int stages, int micro_batches,
                    int mb_split, std::vector<std::vector<int>> placement);

// Stage s on worker s.
std::vector<int> down_placement(int D);
// Stage s on worker D-1-s.
std::vector<int> up_placement(int D);
// The V: 2D stages, worker w holds stage w and stage 2D-1-w (so worker 0 holds both ends of the
// model, and worker D-1 hands stage D-1's output to stage D locally).
std::vector<int> v_placement(int D);

// An op laid out at a time slot by a slot-based generator.
struct SlottedOp {
  std::int64_t slot = 0;
  Op op;
};

// Sets schedule.ops: each worker's ops sorted by slot (ties keep their order).
void order_by_slot(Schedule& schedule, std::vector<std::vector<SlottedOp>> per_worker);

}  // namespace chimera::schedule::detail
