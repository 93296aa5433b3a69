// Causal multi-head attention, fused: one OpenMP loop over the (sequence, head) pairs, each pair
// computed by single-threaded GEMMs straight on the [B, T, 3C] qkv layout (no permutes) and
// its softmax rows. One parallel region per pass instead of one per GEMM and per softmax keeps a
// step's barriers few (each costs a scheduler slice on a shared machine).
//
// The scores above the diagonal are masked, so no GEMM computes them: the T x T products go in
// blocks of kCausalBlock rows (or columns), each reaching only as far as the diagonal allows.
// That leaves (n + 1) / 2n of the square's work for n blocks (62.5% at T = 256, 53% at 1024).
// A skipped product is a zero term of a sum, so the results are those of the full square.
#include <algorithm>
#include <cmath>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {

// Rows per block of the score matrix: the GEMMs stay large enough to run at their full rate.
constexpr Index kCausalBlock = 64;

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

// Row block [r0, r1) computes r1 products per row; the column blocks of the backward compute the
// same set (the block lower triangle), transposed.
double CpuBackend::attention_products_share(Index T) const {
  if (T <= 0) return 1.0;
  double products = 0.0;
  for (Index r0 = 0; r0 < T; r0 += kCausalBlock) {
    const Index r1 = std::min(T, r0 + kCausalBlock);
    products += static_cast<double>(r1 - r0) * static_cast<double>(r1);
  }
  return products / (static_cast<double>(T) * static_cast<double>(T));
}

void CpuBackend::attention_forward(float* out, float* att, const float* qkv, Index B, Index T,
                                   Index C, Index H) {
  const Index hs = C / H;
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(dynamic, 1) if (parallel_heads(B, T, C, H))
  for (Index bh = 0; bh < B * H; ++bh) {
    const Index b = bh / H, h = bh % H;
    const float* q = qkv + b * T * 3 * C + h * hs;  // k at + C, v at + 2C; row stride 3C
    float* p = att + bh * T * T;
    for (Index r0 = 0; r0 < T; r0 += kCausalBlock) {
      // Rows r0..r1-1 see keys 0..r1-1 at most.
      const Index r1 = std::min(T, r0 + kCausalBlock);
      gemm_one_thread(Trans::No, Trans::Yes, r1 - r0, r1, hs, scale, q + r0 * 3 * C, 3 * C, q + C,
                      3 * C, 0.0F, p + r0 * T, T);
      for (Index t = r0; t < r1; ++t) causal_softmax_row(p + t * T, t, T);
      gemm_one_thread(Trans::No, Trans::No, r1 - r0, hs, r1, 1.0F, p + r0 * T, T, q + 2 * C, 3 * C,
                      0.0F, out + (b * T + r0) * C + h * hs, C);
    }
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
    for (Index r0 = 0; r0 < T; r0 += kCausalBlock) {
      const Index r1 = std::min(T, r0 + kCausalBlock);
      // datt = dy v^T, the softmax's backward, then dq = scale ds k: rows r0..r1-1, keys < r1.
      gemm_one_thread(Trans::No, Trans::Yes, r1 - r0, r1, hs, 1.0F, dy + r0 * C, C, q + 2 * C,
                      3 * C, 0.0F, ds + r0 * T, T);
      for (Index t = r0; t < r1; ++t)
        causal_softmax_backward_row(ds + t * T, p + t * T, ds + t * T, t, T);
      gemm_one_thread(Trans::No, Trans::No, r1 - r0, hs, r1, scale, ds + r0 * T, T, q + C, 3 * C,
                      0.0F, dq + r0 * 3 * C, 3 * C);
    }
    for (Index c0 = 0; c0 < T; c0 += kCausalBlock) {
      // dv = att^T dy and dk = scale ds^T q: keys c0..c1-1 are seen by queries c0 and later.
      const Index c1 = std::min(T, c0 + kCausalBlock);
      gemm_one_thread(Trans::Yes, Trans::No, c1 - c0, hs, T - c0, 1.0F, p + c0 * T + c0, T,
                      dy + c0 * C, C, 0.0F, dq + c0 * 3 * C + 2 * C, 3 * C);
      gemm_one_thread(Trans::Yes, Trans::No, c1 - c0, hs, T - c0, scale, ds + c0 * T + c0, T,
                      q + c0 * 3 * C, 3 * C, 0.0F, dq + c0 * 3 * C + C, 3 * C);
    }
  }
}

}  // namespace chimera::backend::cpu
