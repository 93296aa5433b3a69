#pragma once
// The CPU backend: oneDNN or BLIS for fp32 GEMMs (oneDNN for bf16), OpenMP for the kernels,
// threads from OMP_NUM_THREADS.
// Every kernel parallelises over rows or columns only, so its results do not depend on the
// thread count; reductions use a fixed order (vector_math.hpp).
#include <memory>
#include <optional>
#include <string>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cpu {

class Bf16Gemm;

// runtime.precision on the CPU: GEMM operands in fp32 or bf16 (every other kernel is fp32).
enum class CpuPrecision { Fp32, Bf16, Bf16Emulated };

class CpuBackend final : public Backend {
 public:
  // `note` (if any) follows the GEMM precision in description(), e.g. why auto chose fp32.
  explicit CpuBackend(CpuPrecision precision = CpuPrecision::Fp32, std::string note = {},
                      const std::string& bf16_engine = {});
  ~CpuBackend() override;

  std::string description() const override;
  std::string gemm_precision() const override;
  std::string gemm_engine() const override;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override {}

  void gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
            Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) override;
  void gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                            const float* a, Index lda, Index stride_a, const float* b, Index ldb,
                            Index stride_b, float beta, float* c, Index ldc, Index stride_c,
                            Index batch) override;

  void accumulate(float* dst, const float* src, Index n) override;
  // Visits only the touched rows.
  void move_rows(float* dst, float* src, Index rows, Index C, const std::int32_t* touched,
                 Index count) override;
  void broadcast_bias(float* out, const float* residual, const float* bias, Index N,
                      Index C) override;
  void bias_backward(float* dbias, const float* dout, Index N, Index C) override;

  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                         Index B, Index T, Index C) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          Index B, Index T, Index C) override;

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, Index N, Index C) override;
  void layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                const float* inp, const float* weight, const float* mean,
                                const float* rstd, Index N, Index C) override;
  void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* mean, const float* rstd, Index N, Index C) override;

  void gelu_forward(float* out, const float* inp, Index n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, Index n) override;

  void attention_forward(float* out, float* att, const float* qkv, Index B, Index T, Index C,
                         Index H) override;
  void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                          const float* att, Index B, Index T, Index C, Index H) override;

  void softmax_cross_entropy_forward(float* logits, float* losses, const std::int32_t* targets,
                                     Index N, Index V, Index ld) override;
  void softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, Index N,
                                      Index ld) override;
  void softmax_rows(float* x, Index N, Index V, Index ld) override;
  // bf16: each row of the gradient rounded once, for both GEMMs (cpu_softmax.cpp).
  void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                             const float* wte, const std::int32_t* targets, Index N, Index C,
                             Index V, float grad_scale, float* logits, Index ld,
                             Index chunk_rows) override;

  void adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                    const AdamWArgs& args) override;
  double sum_of_squares(const float* x, Index n) override;

  void register_weights(const float* data, Index n) override;
  void weights_written_outside(const void* dst, std::size_t bytes) override { written(dst, bytes); }
  // How many times bf16 copies of registered weights were made (0 in fp32).
  std::uint64_t weight_conversions() const;
  double attention_products_share(Index T) const override;
  double conversion_seconds() const override;

 private:
  // One GEMM on the calling thread at the backend's precision (attention heads, batched GEMMs).
  void gemm_one_thread(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                       const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                       Index ldc);
  // Tells the bf16 GEMMs that [dst, dst + bytes) was written (their weight copies may be stale).
  void written(const void* dst, std::size_t bytes);

  CpuPrecision precision_;
  std::unique_ptr<Bf16Gemm> bf16_;  // null in fp32
  std::string note_;
};

// The CPU backend at runtime.precision (fp32, bf16, bf16-emulated, auto); InputError when bf16
// cannot run on this CPU or the precision is unknown.
// `bf16_engine`: BackendOptions::cpu_bf16_engine.
std::unique_ptr<Backend> make_cpu_backend(const std::string& precision,
                                          const std::string& bf16_engine = {});
// Why this CPU cannot run bf16 GEMMs (no AMX-BF16 or AVX-512-BF16), or nullopt when it can.
std::optional<std::string> bf16_unsupported();

// The engine of the fp32 GEMMs (cpu_gemm.cpp): oneDNN where its kernels use AVX-512, else BLIS,
// unless CHIMERA_CPU_GEMM says otherwise (InputError for an unknown name). Process-wide.
enum class Fp32GemmEngine { Blis, Onednn };
Fp32GemmEngine fp32_gemm_engine();
// For tests that run both engines in one process.
void use_fp32_gemm_engine(Fp32GemmEngine engine);
// "oneDNN 2.6.3 (avx512_core_bf16)" or "BLIS 0.9.0 (zen3 kernels)"
std::string fp32_gemm_description();

// An fp32 GEMM (row-major) on the OpenMP team, split into slabs of C (cpu_gemm.cpp).
void gemm_fp32(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc);
// One single-threaded fp32 GEMM (row-major), for kernels that parallelise over many GEMMs.
void gemm_single_thread(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                        const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                        Index ldc);
// Chooses BLIS's kernels before its first call (see cpu_gemm.cpp); idempotent.
void select_blis_kernels();
// "BLIS <version> (<kernel set> kernels)"
std::string blis_description();

}  // namespace chimera::backend::cpu
