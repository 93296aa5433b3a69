// GEMS (Jain et al., SC'20): two model replicas in opposite directions, like Chimera's placement
// (worker p holds stage p of the down pipe and stage D-1-p of the up pipe), but only one pair of
// micro-batches in flight: the down micro-batch's forward, the up one's forward (which follows it
// through the group in the other direction), then both backwards. The next pair starts when the
// previous one has left the worker.
#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

Schedule gems(int D, int N) {
  detail::require_pipeline("gems", D, N);
  CHIMERA_REQUIRE(N % 2 == 0,
                  "gems needs an even N (got N={}): micro-batches run in pairs, one per direction",
                  N);
  Schedule s = detail::make_shell("gems", "", D, D, N, 1,
                                  {detail::down_placement(D), detail::up_placement(D)});
  const int pairs = N / 2;
  for (int w = 0; w < D; ++w) {
    const int up_stage = D - 1 - w;
    for (int k = 0; k < pairs; ++k) {
      s.ops[w].push_back({OpKind::F, 0, w, {k}});
      s.ops[w].push_back({OpKind::F, 1, up_stage, {pairs + k}});
      s.ops[w].push_back({OpKind::B, 0, w, {k}});
      s.ops[w].push_back({OpKind::B, 1, up_stage, {pairs + k}});
    }
  }
  return s;
}

}  // namespace chimera::schedule
