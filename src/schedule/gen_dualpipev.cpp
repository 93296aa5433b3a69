// DualPipeV (DeepSeek, "DualPipe" repository, DualPipe cut in half): the V placement of zb-v —
// worker r holds chunk 0 = stage r and chunk 1 = stage 2D-1-r — fed from one end only. Each
// chunk runs its micro-batches in order. Worker r's program, in eight phases:
//   1. 2(D-1-r) forwards of chunk 0;
//   2. r+1 times: forward chunk 0, forward chunk 1;
//   3. D-1-r times: I of chunk 1, its W at once, forward chunk 1 (the I's gradient leaves before
//      the W runs);
//   4. N-2D+r+1 times: the pairs (F chunk 0, B chunk 1), (F chunk 1, B chunk 0);
//   5. D-1-r times: B chunk 1, then the pair (F chunk 1, B chunk 0);
//   6. r+1 times: backward chunk 1, backward chunk 0 — full B's in the first half, I's in the
//      second (from pair (r+1)/2, rounded down, on: before its chunk-1 backward on odd
//      workers, before its chunk-0 one on even workers), r+1 I's in all;
//   7. D-1-r times: the oldest deferred W, then I of chunk 0;
//   8. the r+1 W's left, oldest first.
// DualPipe overlaps the F and B of a pair (one micro-batch's MoE all-to-all hides behind the other
// one's compute); we do not: the pair runs F then B, and costs F + B. Phase 4 needs a pair on
// worker 0, hence N >= 2D.
#include <deque>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

Schedule dualpipev(int D, int N) {
  detail::require_pipeline("dualpipev", D, N, 2);
  CHIMERA_REQUIRE(N >= 2 * D,
                  "dualpipev needs N >= 2D micro-batches (got N={}, D={}): its steady phase "
                  "pairs forwards and backwards on every worker",
                  N, D);
  const int S = 2 * D;
  Schedule s = detail::make_shell("dualpipev", "", D, S, N, 1, {detail::v_placement(D)});
  for (int r = 0; r < D; ++r) {
    auto& ops = s.ops[r];
    const int stage[2] = {r, S - 1 - r};
    int next_f[2] = {0, 0};
    int next_b[2] = {0, 0};
    std::deque<Op> deferred_w;  // W's of the I's run so far, oldest first
    auto F = [&](int chunk) { ops.push_back({OpKind::F, 0, stage[chunk], {next_f[chunk]++}}); };
    auto B = [&](int chunk, bool split) {
      const int mb = next_b[chunk]++;
      if (!split) {
        ops.push_back({OpKind::B, 0, stage[chunk], {mb}});
        return;
      }
      ops.push_back({OpKind::I, 0, stage[chunk], {mb}});
      deferred_w.push_back({OpKind::W, 0, stage[chunk], {mb}});
    };
    auto W = [&] {
      CHIMERA_CHECK(!deferred_w.empty(), "dualpipev: worker {} runs a W with none deferred", r);
      ops.push_back(deferred_w.front());
      deferred_w.pop_front();
    };

    for (int i = 0; i < 2 * (D - 1 - r); ++i) F(0);  // 1
    for (int i = 0; i <= r; ++i) {                   // 2
      F(0);
      F(1);
    }
    for (int i = 0; i < D - 1 - r; ++i) {  // 3
      B(1, true);
      W();
      F(1);
    }
    for (int i = 0; i < N - 2 * D + r + 1; ++i) {  // 4
      F(0);
      B(1, false);
      F(1);
      B(0, false);
    }
    for (int i = 0; i < D - 1 - r; ++i) {  // 5
      B(1, false);
      F(1);
      B(0, false);
    }
    bool split = false;
    for (int i = 0; i <= r; ++i) {  // 6
      if (i == (r + 1) / 2 && r % 2 == 1) split = true;
      B(1, split);
      if (i == (r + 1) / 2 && r % 2 == 0) split = true;
      B(0, split);
    }
    for (int i = 0; i < D - 1 - r; ++i) {  // 7
      W();
      B(0, true);
    }
    while (!deferred_w.empty()) W();  // 8
  }
  return s;
}

}  // namespace chimera::schedule
