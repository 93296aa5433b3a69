// GEMMs through cuBLAS, and the causal attention built from its strided-batched GEMMs and the
// softmax kernels (kernels_rows.cu).
//
// cuBLAS is column-major; a row-major matrix with row stride ld is the column-major matrix of its
// transpose with the same ld. So row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
// one call with the operands swapped and m, n swapped, transposes unchanged.
#include <climits>
#include <cmath>

#include "chimera/core/error.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "kernels.hpp"

namespace chimera::backend::cuda {

namespace {

cublasOperation_t op(Trans t) {
  return t == Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

int to_int(Index x, const char* what) {
  CHIMERA_CHECK(x >= 0 && x <= INT_MAX, "GEMM {} = {} does not fit cuBLAS's int", what, x);
  return static_cast<int>(x);
}

}  // namespace

void CudaBackend::gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                       const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                       Index ldc) {
  if (m == 0 || n == 0) return;
  CUBLAS_CHECK(cublasGemmEx(cublas_, op(trans_b), op(trans_a), to_int(n, "n"), to_int(m, "m"),
                            to_int(k, "k"), &alpha, b, CUDA_R_32F, to_int(ldb, "ldb"), a,
                            CUDA_R_32F, to_int(lda, "lda"), &beta, c, CUDA_R_32F,
                            to_int(ldc, "ldc"), compute_type_, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k,
                                       float alpha, const float* a, Index lda, Index stride_a,
                                       const float* b, Index ldb, Index stride_b, float beta,
                                       float* c, Index ldc, Index stride_c, Index batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_, op(trans_b), op(trans_a), to_int(n, "n"), to_int(m, "m"), to_int(k, "k"), &alpha, b,
      CUDA_R_32F, to_int(ldb, "ldb"), stride_b, a, CUDA_R_32F, to_int(lda, "lda"), stride_a, &beta,
      c, CUDA_R_32F, to_int(ldc, "ldc"), stride_c, to_int(batch, "batch"), compute_type_,
      CUBLAS_GEMM_DEFAULT));
}

// Head h of sequence b: q, k, v are T x hs blocks of qkv [B, T, 3C] at columns h*hs, C + h*hs and
// 2C + h*hs, row stride 3C. The heads of one sequence are one strided batch (stride hs); the
// sequences take one call each, since (b, h) offsets are not a single stride.
void CudaBackend::attention_forward(float* out, float* att, const float* qkv, Index B, Index T,
                                    Index C, Index H) {
  const Index hs = C / H;
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
  for (Index b = 0; b < B; ++b) {
    const float* q = qkv + b * T * 3 * C;
    // att = scale q k^T (the causal softmax below zeroes the masked half)
    gemm_strided_batched(Trans::No, Trans::Yes, T, T, hs, scale, q, 3 * C, hs, q + C, 3 * C, hs,
                         0.0F, att + b * H * T * T, T, T * T, H);
  }
  launch_causal_softmax_forward(stream_, att, B * H * T, T);
  for (Index b = 0; b < B; ++b) {
    const float* v = qkv + b * T * 3 * C + 2 * C;
    gemm_strided_batched(Trans::No, Trans::No, T, hs, T, 1.0F, att + b * H * T * T, T, T * T, v,
                         3 * C, hs, 0.0F, out + b * T * C, C, hs, H);
  }
}

void CudaBackend::attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                                     const float* att, Index B, Index T, Index C, Index H) {
  const Index hs = C / H;
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
  for (Index b = 0; b < B; ++b) {
    const float* q = qkv + b * T * 3 * C;
    const float* dy = dout + b * T * C;
    const float* p = att + b * H * T * T;
    float* ds = datt + b * H * T * T;
    float* dq = dqkv + b * T * 3 * C;
    // datt = dy v^T;  dv = att^T dy
    gemm_strided_batched(Trans::No, Trans::Yes, T, T, hs, 1.0F, dy, C, hs, q + 2 * C, 3 * C, hs,
                         0.0F, ds, T, T * T, H);
    gemm_strided_batched(Trans::Yes, Trans::No, T, hs, T, 1.0F, p, T, T * T, dy, C, hs, 0.0F,
                         dq + 2 * C, 3 * C, hs, H);
  }
  launch_causal_softmax_backward(stream_, datt, att, B * H * T, T);
  for (Index b = 0; b < B; ++b) {
    const float* q = qkv + b * T * 3 * C;
    const float* ds = datt + b * H * T * T;
    float* dq = dqkv + b * T * 3 * C;
    // dq = scale ds k;  dk = scale ds^T q
    gemm_strided_batched(Trans::No, Trans::No, T, hs, T, scale, ds, T, T * T, q + C, 3 * C, hs,
                         0.0F, dq, 3 * C, hs, H);
    gemm_strided_batched(Trans::Yes, Trans::No, T, hs, T, scale, ds, T, T * T, q, 3 * C, hs, 0.0F,
                         dq + C, 3 * C, hs, H);
  }
}

}  // namespace chimera::backend::cuda
