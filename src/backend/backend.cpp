#include "chimera/backend/backend.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "chimera/core/error.hpp"
#include "cpu/cpu_backend.hpp"

namespace chimera::backend {

namespace cuda {
// Defined in cuda/cuda_backend.cpp, which only the binaries that link chimera_backend_cuda contain
// (the others never load cuBLAS and NCCL); null in every other binary.
[[gnu::weak]] std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);
}  // namespace cuda

namespace {
bool cuda_linked() {
  return &cuda::make_cuda_backend != nullptr;
}
}  // namespace

std::unique_ptr<DeviceGroup> Backend::join_device_group(const std::string& /*id*/, int /*size*/,
                                                        int /*rank*/) {
  throw Error(
      fmt::format("{}backend '{}' has no device collectives", rank_prefix(), description()));
}

void Backend::move_rows(float* dst, float* src, Index rows, Index C,
                        const std::int32_t* /*touched*/, Index /*count*/) {
  accumulate(dst, src, rows * C);
  fill_zero(src, static_cast<std::size_t>(rows * C) * sizeof(float));
}

void Backend::softmax_rows(float* x, Index N, Index V, Index ld) {
  // Targets 0 (zero bytes are int32 zeros) and losses, in this backend's memory.
  const std::size_t bytes = static_cast<std::size_t>(N) * (sizeof(std::int32_t) + sizeof(float));
  void* scratch = allocate(bytes);
  fill_zero(scratch, bytes);
  auto* targets = static_cast<std::int32_t*>(scratch);
  softmax_cross_entropy_forward(x, reinterpret_cast<float*>(targets + N), targets, N, V, ld);
  deallocate(scratch);
}

void Backend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                    const float* wte, const std::int32_t* targets, Index N, Index C,
                                    Index V, float grad_scale, float* logits, Index ld,
                                    Index chunk_rows) {
  for (Index begin = 0; begin < N; begin += chunk_rows) {
    const Index rows = std::min(chunk_rows, N - begin);
    const float* x_rows = x + begin * C;
    gemm(Trans::No, Trans::Yes, rows, V, C, 1.0F, x_rows, C, wte, C, 0.0F, logits, ld);
    softmax_cross_entropy_forward(logits, losses + begin, targets + begin, rows, V, ld);
    if (grad_scale == 0.0F) continue;
    softmax_cross_entropy_backward(logits, targets + begin, rows, ld);
    gemm(Trans::No, Trans::No, rows, C, V, grad_scale, logits, ld, wte, C, 0.0F, dx + begin * C, C);
    gemm(Trans::Yes, Trans::No, V, C, rows, grad_scale, logits, ld, x_rows, C, 1.0F, dwte, C);
  }
}

std::vector<std::string> available_backends() {
  if (cuda_linked()) return {"cpu", "cuda"};
  return {"cpu"};
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::Cpu) {
    return cpu::make_cpu_backend(options.precision, options.cpu_bf16_engine);
  }
  if (cuda_linked()) return cuda::make_cuda_backend(options);
  throw InputError(
      fmt::format("runtime.backend = 'cuda': this build has no CUDA backend (built: {}); "
                  "configure with CUDA (cmake --preset cuda, see docs/cuda.md)",
                  fmt::join(available_backends(), ", ")));
}

}  // namespace chimera::backend
