#include "chimera/backend/backend.hpp"

#include <fmt/ranges.h>

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

std::vector<std::string> available_backends() {
  if (cuda_linked()) return {"cpu", "cuda"};
  return {"cpu"};
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::Cpu) return cpu::make_cpu_backend(options.precision);
  if (cuda_linked()) return cuda::make_cuda_backend(options);
  throw InputError(
      fmt::format("runtime.backend = 'cuda': this build has no CUDA backend (built: {}); "
                  "configure with CUDA (cmake --preset cuda, see docs/cuda.md)",
                  fmt::join(available_backends(), ", ")));
}

}  // namespace chimera::backend
