#include "cuda_check.hpp"

#include "chimera/core/error.hpp"

namespace chimera::backend::cuda {

void fail_cuda(const char* file, int line, const char* call, cudaError_t code) {
  throw Error(fmt::format("{}{}:{}: {} failed: {} ({})", rank_prefix(), file, line, call,
                          cudaGetErrorString(code), cudaGetErrorName(code)));
}

void fail_cublas(const char* file, int line, const char* call, cublasStatus_t code) {
  throw Error(fmt::format("{}{}:{}: {} failed: {} ({})", rank_prefix(), file, line, call,
                          cublasGetStatusString(code), cublasGetStatusName(code)));
}

}  // namespace chimera::backend::cuda
