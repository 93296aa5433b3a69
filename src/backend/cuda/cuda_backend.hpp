#pragma once
// The CUDA backend: one device per rank, one compute stream, cuBLAS for every GEMM (the compute
// type follows runtime.precision), the CUDA kernels of kernels_*.cu for the rest, and NCCL
// groups for gradient sums on a stream of their own (docs/cuda.md).
//
// Calls are asynchronous on the compute stream except where the interface hands data to the
// host: copy_to_host, copy_from_host (the host buffer may be reused at once), sum_of_squares and
// synchronize return after the stream has caught up.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "device_info.hpp"

namespace chimera::backend::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;

  std::string description() const override;
  std::string gemm_precision() const override { return precision_; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override;

  void gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
            Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) override;
  void gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                            const float* a, Index lda, Index stride_a, const float* b, Index ldb,
                            Index stride_b, float beta, float* c, Index ldc, Index stride_c,
                            Index batch) override;

  void accumulate(float* dst, const float* src, Index n) override;
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

  void adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                    const AdamWArgs& args) override;
  double sum_of_squares(const float* x, Index n) override;

  bool host_memory() const override { return false; }
  void* allocate_host(std::size_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  std::string device_id() const override;
  bool has_device_groups() const override;
  std::string new_device_group_id() override;
  std::unique_ptr<DeviceGroup> join_device_group(const std::string& id, int size,
                                                 int rank) override;
  std::optional<PeakFlops> peak_flops() const override;

  // Device collectives (collectives.cpp): enqueues `issue` on the collective stream, after every
  // call issued on the compute stream so far; returns the ticket of its completion. Collectives
  // run one after another in the order they were enqueued.
  std::uint64_t run_collective(const std::function<void(cudaStream_t)>& issue);
  bool collective_finished(std::uint64_t ticket);

 private:
  // Scratch that grows to the largest request. A buffer that is outgrown stays allocated until
  // the backend is destroyed: kernels queued earlier may still read it, and freeing device memory
  // synchronises the whole device, which must not happen while a collective is in flight.
  void* scratch(std::size_t bytes);
  void* pinned_scratch(std::size_t bytes);

  int device_ = 0;
  DeviceInfo info_;
  std::string precision_;
  cublasComputeType_t compute_type_ = CUBLAS_COMPUTE_32F;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::vector<void*> scratch_;  // the last one is the current one
  std::vector<void*> pinned_scratch_;
  std::size_t scratch_bytes_ = 0, pinned_scratch_bytes_ = 0;

  struct PendingCollective {
    std::uint64_t ticket;
    cudaEvent_t done;
  };
  cudaStream_t collective_stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;
  std::deque<PendingCollective> pending_collectives_;
  std::vector<cudaEvent_t> free_events_;
  std::uint64_t last_ticket_ = 0, finished_through_ = 0;
};

// The backend for make_backend(BackendKind::Cuda) (backend.cpp finds it through a weak symbol).
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

}  // namespace chimera::backend::cuda
