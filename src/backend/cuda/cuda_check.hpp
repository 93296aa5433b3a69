#pragma once
// Check macros for CUDA runtime, cuBLAS and NCCL calls: a failure throws chimera::Error with
// file, line, rank, the call and the library's own description of the error.
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace chimera::backend::cuda {

[[noreturn]] void fail_cuda(const char* file, int line, const char* call, cudaError_t code);
[[noreturn]] void fail_cublas(const char* file, int line, const char* call, cublasStatus_t code);

}  // namespace chimera::backend::cuda

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t cuda_check_rc_ = (call);                                        \
    if (cuda_check_rc_ != cudaSuccess) [[unlikely]] {                                 \
      ::chimera::backend::cuda::fail_cuda(__FILE__, __LINE__, #call, cuda_check_rc_); \
    }                                                                                 \
  } while (0)

#define CUBLAS_CHECK(call)                                                                \
  do {                                                                                    \
    const cublasStatus_t cublas_check_rc_ = (call);                                       \
    if (cublas_check_rc_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                         \
      ::chimera::backend::cuda::fail_cublas(__FILE__, __LINE__, #call, cublas_check_rc_); \
    }                                                                                     \
  } while (0)

// After a kernel launch: launch configuration errors surface here rather than at a later call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
