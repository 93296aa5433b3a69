#include "chimera/backend/backend.hpp"

#include <fmt/ranges.h>

#include "chimera/core/error.hpp"
#include "cpu/cpu_backend.hpp"
#ifdef CHIMERA_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace chimera::backend {

std::unique_ptr<DeviceGroup> Backend::join_device_group(const std::string& /*id*/, int /*size*/,
                                                        int /*rank*/) {
  throw Error(
      fmt::format("{}backend '{}' has no device collectives", rank_prefix(), description()));
}

std::vector<std::string> available_backends() {
#ifdef CHIMERA_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options) {
  if (name == "cpu") {
    CHIMERA_REQUIRE(options.precision == "fp32",
                    "runtime.precision = '{}' needs runtime.backend = 'cuda': the CPU backend "
                    "computes in fp32 only",
                    options.precision);
    return std::make_unique<cpu::CpuBackend>();
  }
#ifdef CHIMERA_HAVE_CUDA
  if (name == "cuda") return std::make_unique<cuda::CudaBackend>(options);
#endif
  CHIMERA_REQUIRE(name != "cuda",
                  "runtime.backend = 'cuda': this build has no CUDA backend (built: {}); "
                  "configure with CUDA (cmake --preset cuda, see docs/cuda.md)",
                  fmt::join(available_backends(), ", "));
  throw InputError(fmt::format("runtime.backend = '{}' is not available in this build (built: {})",
                               name, fmt::join(available_backends(), ", ")));
}

}  // namespace chimera::backend
