// GEMM through BLIS's typed expert API (row-major = row stride ld, column stride 1), with the
// thread count of each call given explicitly so that batched calls can run one GEMM per thread.
#include <blis.h>
#include <omp.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "chimera/core/error.hpp"
#include "cpu_backend.hpp"

namespace chimera::backend::cpu {

// BLIS 0.9 does not recognise recent CPUs (e.g. AMD Zen 4/5) and falls back to its slow generic
// kernels there. Where the CPU has the AVX-512 subsets BLIS's Skylake-X kernels use, select those
// (measured on Zen 5: 310 GFLOP/s on 2 cores instead of 68). The environment variable is read
// once, at BLIS's first call, so this must run before any BLIS call; a user's BLIS_ARCH_TYPE wins.
void select_blis_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("BLIS_ARCH_TYPE") != nullptr) return;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(BLIS_ARCH_SKX)).c_str(), 0);
    }
  });
}

std::string blis_description() {
  select_blis_kernels();
  return fmt::format("BLIS {} ({} kernels)", bli_info_get_version_str(),
                     bli_arch_string(bli_arch_query_id()));
}

namespace {

// GEMMs with fewer multiply-adds than this run on one thread: waking the team costs more.
constexpr Index kParallelMinMultiplyAdds = Index{1} << 18;

int threads_for(Index m, Index n, Index k) {
  return m * n * k >= kParallelMinMultiplyAdds ? omp_get_max_threads() : 1;
}

trans_t blis_trans(Trans t) {
  return t == Trans::Yes ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
}

void blis_gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc, int threads) {
  rntm_t rntm;
  bli_rntm_init(&rntm);
  bli_rntm_set_num_threads(threads, &rntm);
  // BLIS takes non-const pointers but reads A, B, alpha and beta only.
  bli_sgemm_ex(blis_trans(trans_a), blis_trans(trans_b), m, n, k, &alpha, const_cast<float*>(a),
               lda, 1, const_cast<float*>(b), ldb, 1, &beta, c, ldc, 1, nullptr, &rntm);
}

}  // namespace

void CpuBackend::gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                      const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                      Index ldc) {
  blis_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, omp_get_max_threads());
}

void CpuBackend::gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k,
                                      float alpha, const float* a, Index lda, Index stride_a,
                                      const float* b, Index ldb, Index stride_b, float beta,
                                      float* c, Index ldc, Index stride_c, Index batch) {
  const int threads = threads_for(m, n, k * batch);
  if (threads > 1 && batch >= threads) {
    // One single-threaded GEMM per thread: small matrices parallelise badly inside BLIS.
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < batch; ++i) {
      blis_gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                beta, c + i * stride_c, ldc, 1);
    }
  } else {
    for (Index i = 0; i < batch; ++i) {
      blis_gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                beta, c + i * stride_c, ldc, threads_for(m, n, k));
    }
  }
}

}  // namespace chimera::backend::cpu
