#include "kernel_profile.hpp"

#include "chimera/core/timer.hpp"

namespace chimera::cli {

using backend::Index;
using backend::Trans;

const char* kernel_class_name(KernelClass k) {
  switch (k) {
    case KernelClass::Gemm:
      return "GEMMs (blocks)";
    case KernelClass::HeadLoss:
      return "head + loss";
    case KernelClass::Attention:
      return "attention";
    case KernelClass::LayerNorm:
      return "layer norm";
    case KernelClass::Gelu:
      return "GELU";
    case KernelClass::Conversion:
      return "conversions";
    case KernelClass::Optimizer:
      return "optimizer";
    case KernelClass::Other:
    case KernelClass::Count:
      break;
  }
  return "other";
}

template <typename F>
auto ProfilingBackend::timed(KernelClass k, F&& f) {
  const double converted = inner_.conversion_seconds();
  Stopwatch watch;
  struct Account {
    ProfilingBackend& self;
    KernelClass k;
    double converted;
    Stopwatch& watch;
    ~Account() {
      const double conversions = self.inner_.conversion_seconds() - converted;
      self.seconds_[static_cast<int>(KernelClass::Conversion)] += conversions;
      self.seconds_[static_cast<int>(k)] += watch.seconds() - conversions;
    }
  } account{*this, k, converted, watch};
  return f();
}

void ProfilingBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  timed(KernelClass::Other, [&] { inner_.copy_from_host(dst, src, bytes); });
}
void ProfilingBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  timed(KernelClass::Other, [&] { inner_.copy_to_host(dst, src, bytes); });
}
void ProfilingBackend::copy(void* dst, const void* src, std::size_t bytes) {
  timed(KernelClass::Other, [&] { inner_.copy(dst, src, bytes); });
}
void ProfilingBackend::fill_zero(void* dst, std::size_t bytes) {
  timed(KernelClass::Other, [&] { inner_.fill_zero(dst, bytes); });
}
void ProfilingBackend::gemm(Trans ta, Trans tb, Index m, Index n, Index k, float alpha,
                            const float* a, Index lda, const float* b, Index ldb, float beta,
                            float* c, Index ldc) {
  timed(KernelClass::Gemm,
        [&] { inner_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
}
void ProfilingBackend::gemm_strided_batched(Trans ta, Trans tb, Index m, Index n, Index k,
                                            float alpha, const float* a, Index lda, Index stride_a,
                                            const float* b, Index ldb, Index stride_b, float beta,
                                            float* c, Index ldc, Index stride_c, Index batch) {
  timed(KernelClass::Gemm, [&] {
    inner_.gemm_strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                ldc, stride_c, batch);
  });
}
void ProfilingBackend::accumulate(float* dst, const float* src, Index n) {
  timed(KernelClass::Other, [&] { inner_.accumulate(dst, src, n); });
}
void ProfilingBackend::move_rows(float* dst, float* src, Index rows, Index C,
                                 const std::int32_t* touched, Index count) {
  timed(KernelClass::Other, [&] { inner_.move_rows(dst, src, rows, C, touched, count); });
}
void ProfilingBackend::broadcast_bias(float* out, const float* residual, const float* bias, Index N,
                                      Index C) {
  timed(KernelClass::Other, [&] { inner_.broadcast_bias(out, residual, bias, N, C); });
}
void ProfilingBackend::bias_backward(float* dbias, const float* dout, Index N, Index C) {
  timed(KernelClass::Other, [&] { inner_.bias_backward(dbias, dout, N, C); });
}
void ProfilingBackend::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                         const float* wpe, Index B, Index T, Index C) {
  timed(KernelClass::Other, [&] { inner_.embedding_forward(out, tokens, wte, wpe, B, T, C); });
}
void ProfilingBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                          const std::int32_t* tokens, Index B, Index T, Index C) {
  timed(KernelClass::Other, [&] { inner_.embedding_backward(dwte, dwpe, dout, tokens, B, T, C); });
}
void ProfilingBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, Index N, Index C) {
  timed(KernelClass::LayerNorm,
        [&] { inner_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); });
}
void ProfilingBackend::layernorm_backward_input(float* dinp, const float* dresidual,
                                                const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, Index N, Index C) {
  timed(KernelClass::LayerNorm, [&] {
    inner_.layernorm_backward_input(dinp, dresidual, dout, inp, weight, mean, rstd, N, C);
  });
}
void ProfilingBackend::layernorm_backward_params(float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, Index N, Index C) {
  timed(KernelClass::LayerNorm,
        [&] { inner_.layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd, N, C); });
}
void ProfilingBackend::gelu_forward(float* out, const float* inp, Index n) {
  timed(KernelClass::Gelu, [&] { inner_.gelu_forward(out, inp, n); });
}
void ProfilingBackend::gelu_backward(float* dinp, const float* inp, const float* dout, Index n) {
  timed(KernelClass::Gelu, [&] { inner_.gelu_backward(dinp, inp, dout, n); });
}
void ProfilingBackend::attention_forward(float* out, float* att, const float* qkv, Index B, Index T,
                                         Index C, Index H) {
  timed(KernelClass::Attention, [&] { inner_.attention_forward(out, att, qkv, B, T, C, H); });
}
void ProfilingBackend::attention_backward(float* dqkv, float* datt, const float* dout,
                                          const float* qkv, const float* att, Index B, Index T,
                                          Index C, Index H) {
  timed(KernelClass::Attention,
        [&] { inner_.attention_backward(dqkv, datt, dout, qkv, att, B, T, C, H); });
}
void ProfilingBackend::softmax_cross_entropy_forward(float* logits, float* losses,
                                                     const std::int32_t* targets, Index N, Index V,
                                                     Index ld) {
  timed(KernelClass::HeadLoss,
        [&] { inner_.softmax_cross_entropy_forward(logits, losses, targets, N, V, ld); });
}
void ProfilingBackend::softmax_cross_entropy_backward(float* probs, const std::int32_t* targets,
                                                      Index N, Index ld) {
  timed(KernelClass::HeadLoss,
        [&] { inner_.softmax_cross_entropy_backward(probs, targets, N, ld); });
}
void ProfilingBackend::softmax_rows(float* x, Index N, Index V, Index ld) {
  timed(KernelClass::Attention, [&] { inner_.softmax_rows(x, N, V, ld); });
}
void ProfilingBackend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                             const float* wte, const std::int32_t* targets, Index N,
                                             Index C, Index V, float grad_scale, float* logits,
                                             Index ld, Index chunk_rows) {
  timed(KernelClass::HeadLoss, [&] {
    inner_.lm_head_cross_entropy(losses, dx, dwte, x, wte, targets, N, C, V, grad_scale, logits, ld,
                                 chunk_rows);
  });
}
void ProfilingBackend::adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                                    const backend::AdamWArgs& args) {
  timed(KernelClass::Optimizer, [&] { inner_.adamw_update(params, grads, m, v, n, args); });
}
double ProfilingBackend::sum_of_squares(const float* x, Index n) {
  return timed(KernelClass::Optimizer, [&] { return inner_.sum_of_squares(x, n); });
}

}  // namespace chimera::cli
