// AdamW update and the sum of squares behind global-norm clipping.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend.hpp"
#include "parallel.hpp"

namespace chimera::backend::cpu {

namespace {
// sum_of_squares adds fixed chunks in order, so the result does not depend on the thread count.
constexpr Index kSquaresChunk = 16384;
}  // namespace

void CpuBackend::adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                              const AdamWArgs& a) {
  written(params, static_cast<std::size_t>(n) * sizeof(float));
  // The same operations, in the same order, as torch.optim.AdamW (single-tensor path). GCC
  // vectorises the loop (sqrt without errno: src/backend/CMakeLists.txt); the static schedule gives
  // each thread one contiguous stretch of the arrays, which a memory-bound loop streams best.
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (Index i = 0; i < n; ++i) {
    const float g = grads[i] * a.grad_scale;
    const float p = params[i] * a.decay_factor;
    const float mi = m[i] * a.beta1 + g * a.one_minus_beta1;
    const float vi = v[i] * a.beta2 + g * g * a.one_minus_beta2;
    const float denom = std::sqrt(vi) / a.bias_correction2_sqrt + a.eps;
    params[i] = p - a.step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

double CpuBackend::sum_of_squares(const float* x, Index n) {
  const Index chunks = (n + kSquaresChunk - 1) / kSquaresChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(dynamic, 1) if (n >= kParallelMinElements)
  for (Index c = 0; c < chunks; ++c) {
    double acc[8] = {};
    const Index end = std::min(n, (c + 1) * kSquaresChunk);
    Index i = c * kSquaresChunk;
    for (; i + 8 <= end; i += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += static_cast<double>(x[i + l]) * x[i + l];
    }
    for (int l = 0; i < end; ++i, ++l) acc[l] += static_cast<double>(x[i]) * x[i];
    partial[static_cast<std::size_t>(c)] =
        ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  }
  double total = 0.0;
  for (const double p : partial) total += p;
  return total;
}

}  // namespace chimera::backend::cpu
