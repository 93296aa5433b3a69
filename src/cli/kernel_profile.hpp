#pragma once
// A Backend that forwards every call to another one and adds its wall time to the call's kernel
// class, for `chimera bench model`'s breakdown of a training step. Only for backends whose calls
// finish before they return (host memory: the CPU); a GPU's calls return before the kernels run.
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "chimera/backend/backend.hpp"

namespace chimera::cli {

enum class KernelClass {
  Gemm,       // the blocks' GEMMs (linear layers)
  HeadLoss,   // LM head + cross-entropy (its GEMMs included)
  Attention,  // the fused attention kernels (their per-head GEMMs included)
  LayerNorm,
  Gelu,
  Conversion,  // bf16 conversions of GEMM operands (taken out of the classes that made them)
  Optimizer,   // AdamW and the gradient norm
  Other,       // embedding, biases, copies, gradient resets, the tied gradient's rows
  Count
};
const char* kernel_class_name(KernelClass k);

class ProfilingBackend final : public backend::Backend {
 public:
  explicit ProfilingBackend(backend::Backend& inner) : inner_(inner) {}

  // Seconds per class since construction or the last reset().
  const std::array<double, static_cast<int>(KernelClass::Count)>& seconds() const {
    return seconds_;
  }
  void reset() { seconds_.fill(0.0); }

  std::string description() const override { return inner_.description(); }
  std::string gemm_precision() const override { return inner_.gemm_precision(); }
  std::string gemm_engine() const override { return inner_.gemm_engine(); }
  void* allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr) noexcept override { inner_.deallocate(ptr); }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override { inner_.synchronize(); }
  void gemm(backend::Trans ta, backend::Trans tb, backend::Index m, backend::Index n,
            backend::Index k, float alpha, const float* a, backend::Index lda, const float* b,
            backend::Index ldb, float beta, float* c, backend::Index ldc) override;
  void gemm_strided_batched(backend::Trans ta, backend::Trans tb, backend::Index m,
                            backend::Index n, backend::Index k, float alpha, const float* a,
                            backend::Index lda, backend::Index stride_a, const float* b,
                            backend::Index ldb, backend::Index stride_b, float beta, float* c,
                            backend::Index ldc, backend::Index stride_c,
                            backend::Index batch) override;
  void accumulate(float* dst, const float* src, backend::Index n) override;
  void move_rows(float* dst, float* src, backend::Index rows, backend::Index C,
                 const std::int32_t* touched, backend::Index count) override;
  void broadcast_bias(float* out, const float* residual, const float* bias, backend::Index N,
                      backend::Index C) override;
  void bias_backward(float* dbias, const float* dout, backend::Index N, backend::Index C) override;
  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                         backend::Index B, backend::Index T, backend::Index C) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          backend::Index B, backend::Index T, backend::Index C) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, backend::Index N,
                         backend::Index C) override;
  void layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                const float* inp, const float* weight, const float* mean,
                                const float* rstd, backend::Index N, backend::Index C) override;
  void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* mean, const float* rstd, backend::Index N,
                                 backend::Index C) override;
  void gelu_forward(float* out, const float* inp, backend::Index n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, backend::Index n) override;
  void attention_forward(float* out, float* att, const float* qkv, backend::Index B,
                         backend::Index T, backend::Index C, backend::Index H) override;
  void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                          const float* att, backend::Index B, backend::Index T, backend::Index C,
                          backend::Index H) override;
  void softmax_cross_entropy_forward(float* logits, float* losses, const std::int32_t* targets,
                                     backend::Index N, backend::Index V,
                                     backend::Index ld) override;
  void softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, backend::Index N,
                                      backend::Index ld) override;
  void softmax_rows(float* x, backend::Index N, backend::Index V, backend::Index ld) override;
  void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                             const float* wte, const std::int32_t* targets, backend::Index N,
                             backend::Index C, backend::Index V, float grad_scale, float* logits,
                             backend::Index ld, backend::Index chunk_rows) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, backend::Index n,
                    const backend::AdamWArgs& args) override;
  double sum_of_squares(const float* x, backend::Index n) override;
  void register_weights(const float* data, backend::Index n) override {
    inner_.register_weights(data, n);
  }
  double conversion_seconds() const override { return inner_.conversion_seconds(); }
  double attention_products_share(backend::Index T) const override {
    return inner_.attention_products_share(T);
  }
  bool host_memory() const override { return inner_.host_memory(); }
  std::optional<backend::PeakFlops> peak_flops() const override { return inner_.peak_flops(); }

 private:
  // Runs f, adding its time to class k, less the operand conversions it made, which go to
  // Conversion.
  template <typename F>
  auto timed(KernelClass k, F&& f);

  backend::Backend& inner_;
  std::array<double, static_cast<int>(KernelClass::Count)> seconds_{};
};

}  // namespace chimera::cli
