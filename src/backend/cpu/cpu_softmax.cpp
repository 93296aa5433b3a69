// Causal attention softmax and the fused softmax + cross-entropy of the LM head. One row per
// iteration; each row is read from memory once and then stays in cache for its later passes.
#include <cmath>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {

// In place: x[0..n) becomes exp(x - max) and the ordered sum of those values is returned.
float exponentiate_in_place(float* x, Index n, float max) {
  return ordered_sum(n, [x, max](Index i) {
    const float e = fast_exp(x[i] - max);
    x[i] = e;
    return e;
  });
}

}  // namespace

void CpuBackend::causal_softmax_forward(float* att, Index T, Index matrices) {
#pragma omp parallel for schedule(static) if (matrices * T * T >= kParallelMinElements)
  for (Index row = 0; row < matrices * T; ++row) {
    const Index t = row % T;
    float* x = att + row * T;
    const float max = ordered_max(x, t + 1);
    const float inv_sum = 1.0F / exponentiate_in_place(x, t + 1, max);
    for (Index i = 0; i <= t; ++i) x[i] *= inv_sum;
    for (Index i = t + 1; i < T; ++i) x[i] = 0.0F;
  }
}

void CpuBackend::causal_softmax_backward(float* dpre, const float* att, const float* datt, Index T,
                                         Index matrices) {
#pragma omp parallel for schedule(static) if (matrices * T * T >= kParallelMinElements)
  for (Index row = 0; row < matrices * T; ++row) {
    const Index t = row % T;
    const float* p = att + row * T;
    const float* dp = datt + row * T;
    const float dot = ordered_sum(t + 1, [p, dp](Index i) { return p[i] * dp[i]; });
    float* dx = dpre + row * T;
    for (Index i = 0; i <= t; ++i) dx[i] = p[i] * (dp[i] - dot);
    for (Index i = t + 1; i < T; ++i) dx[i] = 0.0F;
  }
}

void CpuBackend::softmax_cross_entropy_forward(float* logits, float* losses,
                                               const std::int32_t* targets, Index N, Index V,
                                               Index ld) {
#pragma omp parallel for schedule(dynamic, 4) if (N * V >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) {
    float* x = logits + r * ld;
    const float target_logit = x[targets[r]];
    const float max = ordered_max(x, V);
    const float sum = exponentiate_in_place(x, V, max);
    // -log softmax(x)[target] = log(sum exp(x - max)) + max - x[target]
    losses[r] = (std::log(sum) + max) - target_logit;
    const float inv_sum = 1.0F / sum;
    for (Index i = 0; i < V; ++i) x[i] *= inv_sum;
  }
}

void CpuBackend::softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, Index N,
                                                Index ld) {
  for (Index r = 0; r < N; ++r) probs[r * ld + targets[r]] -= 1.0F;
}

}  // namespace chimera::backend::cpu
