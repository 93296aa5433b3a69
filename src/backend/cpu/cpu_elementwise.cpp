// Elementwise and per-row kernels: accumulation (also of listed rows), bias broadcast and its
// backward, GELU.
#include <omp.h>

#include <vector>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "vector_math.hpp"

namespace chimera::backend::cpu {

namespace {
constexpr float kGeluScale = 0.7978845608028654F;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715F;
}  // namespace

void CpuBackend::accumulate(float* dst, const float* src, Index n) {
  written(dst, static_cast<std::size_t>(n) * sizeof(float));
#pragma omp parallel for schedule(dynamic, kDynamicChunk) if (n >= kParallelMinElements)
  for (Index i = 0; i < n; ++i) dst[i] += src[i];
}

void CpuBackend::move_rows(float* dst, float* src, Index rows, Index C, const std::int32_t* touched,
                           Index count) {
  written(dst, static_cast<std::size_t>(rows * C) * sizeof(float));
#pragma omp parallel for schedule(static) if (count * C >= kParallelMinElements)
  for (Index i = 0; i < count; ++i) {
    const Index r = touched[i];
    float* to = dst + r * C;
    float* from = src + r * C;
    for (Index j = 0; j < C; ++j) {
      to[j] += from[j];
      from[j] = 0.0F;
    }
  }
}

void CpuBackend::broadcast_bias(float* out, const float* residual, const float* bias, Index N,
                                Index C) {
#pragma omp parallel for schedule(static) if (N * C >= kParallelMinElements)
  for (Index r = 0; r < N; ++r) {
    float* row = out + r * C;
    if (residual != nullptr) {
      const float* res = residual + r * C;
      for (Index j = 0; j < C; ++j) row[j] = res[j] + bias[j];
    } else {
      for (Index j = 0; j < C; ++j) row[j] = bias[j];
    }
  }
}

void CpuBackend::bias_backward(float* dbias, const float* dout, Index N, Index C) {
#pragma omp parallel if (N * C >= kParallelMinElements)
  {
    const auto [begin, end] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
    std::vector<float> sum(static_cast<std::size_t>(end - begin), 0.0F);
    for (Index r = 0; r < N; ++r) {
      const float* row = dout + r * C + begin;
      for (Index j = 0; j < end - begin; ++j) sum[j] += row[j];
    }
    for (Index j = begin; j < end; ++j) dbias[j] += sum[j - begin];
  }
}

void CpuBackend::gelu_forward(float* out, const float* inp, Index n) {
  map_elements(out, inp, nullptr, n, [](auto x, auto) {
    const auto u = kGeluScale * (x + kGeluCubic * x * x * x);
    return 0.5F * x * (1.0F + fast_tanh(u));
  });
}

void CpuBackend::gelu_backward(float* dinp, const float* inp, const float* dout, Index n) {
  map_elements(dinp, inp, dout, n, [](auto x, auto dy) {
    const auto u = kGeluScale * (x + kGeluCubic * x * x * x);
    const auto t = fast_tanh(u);
    const auto du_dx = kGeluScale * (1.0F + 3.0F * kGeluCubic * x * x);
    const auto grad = 0.5F * (1.0F + t) + 0.5F * x * (1.0F - t * t) * du_dx;
    return grad * dy;
  });
}

}  // namespace chimera::backend::cpu
