// The CPU backend at runtime.precision, or one line saying why that precision cannot run here.
#include "bf16_gemm.hpp"
#include "chimera/core/error.hpp"
#include "cpu_backend.hpp"
#include "onednn_matmul.hpp"

namespace chimera::backend::cpu {

std::optional<std::string> bf16_unsupported() {
  return OnednnMatmul::unsupported(OperandType::Bf16);
}

std::unique_ptr<Backend> make_cpu_backend(const std::string& precision,
                                          const std::string& bf16_engine) {
  if (precision == "fp32") return std::make_unique<CpuBackend>(CpuPrecision::Fp32);
  if (precision == "bf16-emulated") return std::make_unique<CpuBackend>(CpuPrecision::Bf16Emulated);
  if (precision == "bf16" || precision == "auto") {
    const auto why = bf16_unsupported();
    if (!why) return std::make_unique<CpuBackend>(CpuPrecision::Bf16, std::string(), bf16_engine);
    CHIMERA_REQUIRE(precision == "auto",
                    "runtime.precision = 'bf16': {}; use 'fp32' (or 'bf16-emulated', bf16 "
                    "numerics on the fp32 units, for tests)",
                    *why);
    return std::make_unique<CpuBackend>(CpuPrecision::Fp32, "auto chose fp32: " + *why);
  }
  throw InputError(
      fmt::format("runtime.precision = '{}' on the CPU backend: expected fp32, bf16, "
                  "bf16-emulated or auto (tf32 is the CUDA backend's)",
                  precision));
}

}  // namespace chimera::backend::cpu
