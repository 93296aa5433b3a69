// The fused softmax + cross-entropy of the LM head. One row per iteration: each row is read from
// memory once and then stays in cache for its later passes.
#include <cmath>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {

// Row x of V values becomes its softmax; returns log(sum exp(x - max)) + max.
float softmax_row(float* x, Index V) {
  const float max = ordered_max(x, V);
  const float sum = exponentiate_in_place(x, V, max);
  const float inv_sum = 1.0F / sum;
  for (Index i = 0; i < V; ++i) x[i] *= inv_sum;
  return std::log(sum) + max;
}

}  // namespace

void CpuBackend::softmax_cross_entropy_forward(float* logits, float* losses,
                                               const std::int32_t* targets, Index N, Index V,
                                               Index ld) {
#pragma omp parallel for schedule(dynamic, 4) if (N * V >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) {
    float* x = logits + r * ld;
    const float target_logit = x[targets[r]];
    // -log softmax(x)[target] = log(sum exp(x - max)) + max - x[target]
    losses[r] = softmax_row(x, V) - target_logit;
  }
}

void CpuBackend::softmax_rows(float* x, Index N, Index V, Index ld) {
#pragma omp parallel for schedule(dynamic, 4) if (N * V >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) softmax_row(x + r * ld, V);
}

void CpuBackend::softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, Index N,
                                                Index ld) {
  for (Index r = 0; r < N; ++r) probs[r * ld + targets[r]] -= 1.0F;
}

}  // namespace chimera::backend::cpu
