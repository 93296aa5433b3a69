#pragma once
// What the CUDA backend knows about its device, and the pure functions built on it (no CUDA
// calls here, so that tests run them without a GPU): the dense peak behind MFU figures, and the
// node-local rank a launcher announces in the environment.
#include <optional>
#include <string>
#include <string_view>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cuda {

struct DeviceInfo {
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  int major = 0;     // compute capability
  int minor = 0;
  int sm_count = 0;   // streaming multiprocessors
  int clock_khz = 0;  // peak SM clock
  std::size_t memory_bytes = 0;
  std::string pci_bus_id;  // e.g. "0000:17:00.0"
};

// Dense (no sparsity) peak of `device` for GEMMs at `precision` (fp32: the FP32 units; tf32 and
// bf16: the tensor cores): the vendor's figure for GPUs in the table of docs/cuda.md, else an
// estimate SMs x clock x FLOP per SM and clock for the architecture; nullopt when neither is
// known.
std::optional<PeakFlops> device_peak(const DeviceInfo& device, std::string_view precision);

}  // namespace chimera::backend::cuda
