// Interleaved 1F1B (Megatron-LM virtual stages, Narayanan et al., SC'21): the model is cut into
// D*v stages, worker p holds stages p, p+D, ..., p+(v-1)D (placement[0][s] = s % D). Micro-batches
// enter in groups of D; each worker runs its forwards chunk by chunk over a group, with
// 2(D-1-p) + (v-1)D warm-up forwards, then one forward and one backward in turn.
#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

Schedule interleaved(int D, int N, int v) {
  detail::require_pipeline("interleaved", D, N, std::max(v, 1));
  CHIMERA_REQUIRE(
      v >= 2, "interleaved needs v >= 2 virtual stages per worker (got v={}; v = 1 is 1f1b)", v);
  CHIMERA_REQUIRE(N % D == 0,
                  "interleaved needs N to be a multiple of D (got N={}, D={}): micro-batches enter "
                  "in groups of D",
                  N, D);
  std::vector<int> placement(static_cast<std::size_t>(D) * v);
  for (int st = 0; st < D * v; ++st) placement[st] = st % D;
  Schedule s = detail::make_shell("interleaved", "", D, D * v, N, 1, {placement});

  const int total = N * v;  // ops of each kind per worker
  // The k-th forward (backward) of a worker: micro-batch group k / (D v), chunk (k / D) % v
  // (backwards run the chunks in reverse).
  auto micro_batch = [&](int k) { return (k / (D * v)) * D + k % D; };
  for (int w = 0; w < D; ++w) {
    auto forward = [&](int k) { return Op{OpKind::F, 0, ((k / D) % v) * D + w, {micro_batch(k)}}; };
    auto backward = [&](int k) {
      return Op{OpKind::B, 0, (v - 1 - (k / D) % v) * D + w, {micro_batch(k)}};
    };
    const int warmup = std::min(2 * (D - 1 - w) + (v - 1) * D, total);
    auto& ops = s.ops[w];
    for (int k = 0; k < warmup; ++k) ops.push_back(forward(k));
    for (int k = 0; k + warmup < total; ++k) {
      ops.push_back(forward(k + warmup));
      ops.push_back(backward(k));
    }
    for (int k = total - warmup; k < total; ++k) ops.push_back(backward(k));
  }
  return s;
}

}  // namespace chimera::schedule
