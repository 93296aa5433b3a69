// LayerNorm forward and backward (input and parameter gradients separately, for the split
// backward of zero-bubble schedules).
#include <omp.h>

#include <cmath>
#include <vector>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {
constexpr float kLayerNormEps = 1e-5F;  // GPT-2's layer_norm_epsilon
}

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, Index N, Index C) {
  const float inv_c = 1.0F / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) {
    const float* x = inp + r * C;
    const float m = ordered_sum(C, [x](Index i) { return x[i]; }) * inv_c;
    const float var = ordered_sum(C, [x, m](Index i) { return (x[i] - m) * (x[i] - m); }) * inv_c;
    const float s = 1.0F / std::sqrt(var + kLayerNormEps);
    float* y = out + r * C;
    for (Index i = 0; i < C; ++i) y[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void CpuBackend::layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                          const float* inp, const float* weight, const float* mean,
                                          const float* rstd, Index N, Index C) {
  const float inv_c = 1.0F / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) {
    const float* x = inp + r * C;
    const float* dy = dout + r * C;
    const float m = mean[r];
    const float s = rstd[r];
    // With n = (x - m) s and dn = weight * dy:  dx = s (dn - mean(dn) - n mean(dn n)).
    const float dn_mean = ordered_sum(C, [=](Index i) { return weight[i] * dy[i]; }) * inv_c;
    const float dn_n_mean =
        ordered_sum(C, [=](Index i) { return weight[i] * dy[i] * ((x[i] - m) * s); }) * inv_c;
    float* dx = dinp + r * C;
    const float* res = dresidual != nullptr ? dresidual + r * C : nullptr;
    for (Index i = 0; i < C; ++i) {
      const float n = (x[i] - m) * s;
      const float grad = (weight[i] * dy[i] - dn_mean - n * dn_n_mean) * s;
      dx[i] = res != nullptr ? res[i] + grad : grad;
    }
  }
}

void CpuBackend::layernorm_backward_params(float* dweight, float* dbias, const float* dout,
                                           const float* inp, const float* mean, const float* rstd,
                                           Index N, Index C) {
#pragma omp parallel if (N * C >= kParallelMinElements)
  {
    const auto [begin, end] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
    const auto width = static_cast<std::size_t>(end - begin);
    std::vector<float> dw(width, 0.0F);
    std::vector<float> db(width, 0.0F);
    for (Index r = 0; r < N; ++r) {
      const float* x = inp + r * C + begin;
      const float* dy = dout + r * C + begin;
      const float m = mean[r];
      const float s = rstd[r];
      for (std::size_t j = 0; j < width; ++j) {
        dw[j] += dy[j] * ((x[j] - m) * s);
        db[j] += dy[j];
      }
    }
    for (std::size_t j = 0; j < width; ++j) {
      dweight[begin + static_cast<Index>(j)] += dw[j];
      dbias[begin + static_cast<Index>(j)] += db[j];
    }
  }
}

}  // namespace chimera::backend::cpu
