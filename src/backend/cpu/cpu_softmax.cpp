// The fused softmax + cross-entropy of the LM head. One row per iteration: each row is read from
// memory once and then stays in cache for its later passes.
#include <algorithm>
#include <cmath>

#include "bf16.hpp"
#include "bf16_gemm.hpp"
#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "scratch.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {

struct Exponentiated {
  float sum;  // of exp(x - max): the softmax's denominator
  float max;
};

// Row x of V values becomes exp(x - max).
Exponentiated exponentiate_row(float* x, Index V) {
  const float max = ordered_max(x, V);
  return {exponentiate_in_place(x, V, max), max};
}

// log(sum exp(x)), of the row before exponentiate_row.
float log_sum_exp(const Exponentiated& e) {
  return std::log(e.sum) + e.max;
}

// Row x of V values becomes its softmax; returns log(sum exp(x)).
float softmax_row(float* x, Index V) {
  const Exponentiated e = exponentiate_row(x, V);
  const float inv_sum = 1.0F / e.sum;
  for (Index i = 0; i < V; ++i) x[i] *= inv_sum;
  return log_sum_exp(e);
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

// With bf16 GEMMs, each row of the logits' gradient is rounded to bf16 in the pass that computes
// it, while the row is in cache, and both GEMMs that read it take those values: the default
// rounds the whole chunk again for each of them (two more passes over [rows, V] each). On oneDNN
// the row becomes bf16 bits; on the fp32 units it is rounded in place. The bits, and so the
// results, are those of the default.
void CpuBackend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                       const float* wte, const std::int32_t* targets, Index N,
                                       Index C, Index V, float grad_scale, float* logits, Index ld,
                                       Index chunk_rows) {
  if (!bf16_ || grad_scale == 0.0F) {
    Backend::lm_head_cross_entropy(losses, dx, dwte, x, wte, targets, N, C, V, grad_scale, logits,
                                   ld, chunk_rows);
    return;
  }
  const bool bits = bf16_->multiplies_bf16_bits();
  // The bf16 gradient keeps the logits' padded row stride: with rows exactly V long, oneDNN 2.6
  // takes a kernel for the weight gradient's transposed A that ran at half the speed (Zen 5).
  thread_local Scratch<Bf16Bits> gradient;
  Bf16Bits* dlogits =
      bits ? gradient.get(static_cast<std::size_t>(std::min(chunk_rows, N) * ld)) : nullptr;
  for (Index begin = 0; begin < N; begin += chunk_rows) {
    const Index rows = std::min(chunk_rows, N - begin);
    const float* x_rows = x + begin * C;
    gemm(Trans::No, Trans::Yes, rows, V, C, 1.0F, x_rows, C, wte, C, 0.0F, logits, ld);
#pragma omp parallel for schedule(dynamic, 4) if (rows * V >= kParallelMinElements)
    for (Index r = 0; r < rows; ++r) {
      float* row = logits + r * ld;
      const std::int32_t target = targets[begin + r];
      const float target_logit = row[target];
      // The softmax's scaling, the target's -1 and the rounding in one pass over the row.
      const Exponentiated e = exponentiate_row(row, V);
      losses[begin + r] = log_sum_exp(e) - target_logit;
      const float inv_sum = 1.0F / e.sum;
      const auto write_gradient = [&](auto* out, auto round) {
        const float target_gradient = row[target] * inv_sum - 1.0F;
        for (Index i = 0; i < V; ++i) out[i] = round(row[i] * inv_sum);
        out[target] = round(target_gradient);
      };
      if (bits) {
        write_gradient(dlogits + r * ld, [](float v) { return to_bf16_bits(v); });
      } else {
        write_gradient(row, [](float v) { return round_to_bf16(v); });
      }
    }
    if (bits) {
      bf16_->gemm_bf16_a(Trans::No, Trans::No, rows, C, V, grad_scale, dlogits, ld, wte, C, 0.0F,
                         dx + begin * C, C);
      bf16_->gemm_bf16_a(Trans::Yes, Trans::No, V, C, rows, grad_scale, dlogits, ld, x_rows, C,
                         1.0F, dwte, C);
    } else {
      bf16_->gemm_rounded_a(Trans::No, Trans::No, rows, C, V, grad_scale, logits, ld, wte, C, 0.0F,
                            dx + begin * C, C);
      bf16_->gemm_rounded_a(Trans::Yes, Trans::No, V, C, rows, grad_scale, logits, ld, x_rows, C,
                            1.0F, dwte, C);
    }
  }
}
}  // namespace chimera::backend::cpu
