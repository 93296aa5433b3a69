// Causal multi-head attention, fused: one OpenMP loop over the (sequence, head) pairs, each pair
// computed by single-threaded GEMMs straight on the [B, T, 3C] qkv layout (no permutes) and
// its softmax rows. One parallel region per pass instead of one per GEMM and per softmax keeps a
// step's barriers few (each costs a scheduler slice on a shared machine).
#include <cmath>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {

// Row t of a T x T score matrix: softmax of entries 0..t, zeros after (the causal mask).
void causal_softmax_row(float* x, Index t, Index T) {
  const float max = ordered_max(x, t + 1);
  const float inv_sum = 1.0F / exponentiate_in_place(x, t + 1, max);
  for (Index i = 0; i <= t; ++i) x[i] *= inv_sum;
  for (Index i = t + 1; i < T; ++i) x[i] = 0.0F;
}

// dx = p * (dp - sum(p * dp)) on entries 0..t, zeros after. dx may alias dp.
void causal_softmax_backward_row(float* dx, const float* p, const float* dp, Index t, Index T) {
  const float dot = ordered_sum(t + 1, [p, dp](Index i) { return p[i] * dp[i]; });
  for (Index i = 0; i <= t; ++i) dx[i] = p[i] * (dp[i] - dot);
  for (Index i = t + 1; i < T; ++i) dx[i] = 0.0F;
}

bool parallel_heads(Index B, Index T, Index C, Index H) {
  return B * H > 1 && B * T * T * C >= kParallelMinElements;
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* att, const float* qkv, Index B, Index T,
                                   Index C, Index H) {
  const Index hs = C / H;
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(dynamic, 1) if (parallel_heads(B, T, C, H))
  for (Index bh = 0; bh < B * H; ++bh) {
    const Index b = bh / H, h = bh % H;
    const float* q = qkv + b * T * 3 * C + h * hs;  // k at + C, v at + 2C; row stride 3C
    float* p = att + bh * T * T;
    gemm_one_thread(Trans::No, Trans::Yes, T, T, hs, scale, q, 3 * C, q + C, 3 * C, 0.0F, p, T);
    for (Index t = 0; t < T; ++t) causal_softmax_row(p + t * T, t, T);
    gemm_one_thread(Trans::No, Trans::No, T, hs, T, 1.0F, p, T, q + 2 * C, 3 * C, 0.0F,
                    out + b * T * C + h * hs, C);
  }
}

void CpuBackend::attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                                    const float* att, Index B, Index T, Index C, Index H) {
  const Index hs = C / H;
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(dynamic, 1) if (parallel_heads(B, T, C, H))
  for (Index bh = 0; bh < B * H; ++bh) {
    const Index b = bh / H, h = bh % H;
    const float* q = qkv + b * T * 3 * C + h * hs;
    float* dq = dqkv + b * T * 3 * C + h * hs;
    const float* dy = dout + b * T * C + h * hs;
    const float* p = att + bh * T * T;
    float* ds = datt + bh * T * T;
    // datt = dy v^T;  dv = att^T dy
    gemm_one_thread(Trans::No, Trans::Yes, T, T, hs, 1.0F, dy, C, q + 2 * C, 3 * C, 0.0F, ds, T);
    gemm_one_thread(Trans::Yes, Trans::No, T, hs, T, 1.0F, p, T, dy, C, 0.0F, dq + 2 * C, 3 * C);
    for (Index t = 0; t < T; ++t)
      causal_softmax_backward_row(ds + t * T, p + t * T, ds + t * T, t, T);
    // dq = scale ds k;  dk = scale ds^T q
    gemm_one_thread(Trans::No, Trans::No, T, hs, T, scale, ds, T, q + C, 3 * C, 0.0F, dq, 3 * C);
    gemm_one_thread(Trans::Yes, Trans::No, T, hs, T, scale, ds, T, q, 3 * C, 0.0F, dq + C, 3 * C);
  }
}

}  // namespace chimera::backend::cpu
