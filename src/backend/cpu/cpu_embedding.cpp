// Token + position embedding. The backward gives each thread whole columns of the tables, so that
// repeated tokens add up in token order whatever the thread count.
#include <omp.h>

#include "cpu_backend.hpp"
#include "parallel.hpp"

namespace chimera::backend::cpu {

void CpuBackend::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                   const float* wpe, Index B, Index T, Index C) {
#pragma omp parallel for schedule(static) if (B * T * C >= kParallelMinElements)
  for (Index bt = 0; bt < B * T; ++bt) {
    const float* token_row = wte + static_cast<Index>(tokens[bt]) * C;
    const float* position_row = wpe + (bt % T) * C;
    float* y = out + bt * C;
    for (Index i = 0; i < C; ++i) y[i] = token_row[i] + position_row[i];
  }
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                    const std::int32_t* tokens, Index B, Index T, Index C) {
#pragma omp parallel if (B * T * C >= kParallelMinElements)
  {
    const auto [begin, end] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
    for (Index bt = 0; bt < B * T; ++bt) {
      const float* dy = dout + bt * C;
      float* token_row = dwte + static_cast<Index>(tokens[bt]) * C;
      for (Index i = begin; i < end; ++i) token_row[i] += dy[i];
    }
    for (Index t = 0; t < T; ++t) {
      float* position_row = dwpe + t * C;
      for (Index b = 0; b < B; ++b) {
        const float* dy = dout + (b * T + t) * C;
        for (Index i = begin; i < end; ++i) position_row[i] += dy[i];
      }
    }
  }
}

}  // namespace chimera::backend::cpu
