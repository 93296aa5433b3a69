#include "chimera/backend/backend.hpp"

#include "chimera/core/error.hpp"
#include "cpu/cpu_backend.hpp"

namespace chimera::backend {

std::unique_ptr<Backend> make_backend(std::string_view name) {
  if (name == "cpu") return std::make_unique<cpu::CpuBackend>();
  throw InputError(
      fmt::format("runtime.backend = '{}' is not available in this build (built: cpu)", name));
}

}  // namespace chimera::backend
