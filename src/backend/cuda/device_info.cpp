#include "device_info.hpp"

#include <fmt/format.h>

#include <array>

namespace chimera::backend::cuda {

namespace {

// Vendor datasheet figures, dense, TFLOP/s; 0 = the GPU has no such tensor-core mode. More
// specific names come first (the first entry whose text occurs in the device name wins).
struct SpecSheet {
  std::string_view name;
  double fp32, tf32, bf16;
};
constexpr std::array<SpecSheet, 13> kSpecSheets{{
    {"GH200", 66.9, 494.7, 989.4},
    {"H200 NVL", 60.0, 417.5, 835.5},
    {"H200", 66.9, 494.7, 989.4},
    {"H100 PCIe", 51.2, 378.0, 756.0},
    {"H100 NVL", 60.0, 417.5, 835.5},
    {"H100", 66.9, 494.7, 989.4},
    {"A100", 19.5, 156.0, 312.0},
    {"A800", 19.5, 156.0, 312.0},
    {"L40S", 91.6, 183.0, 362.05},
    {"V100S", 16.4, 0.0, 0.0},
    {"V100-SXM2", 15.7, 0.0, 0.0},
    {"V100", 14.0, 0.0, 0.0},
    {"P100-SXM2", 10.6, 0.0, 0.0},
}};
constexpr SpecSheet kP100Pcie{"P100", 9.3, 0.0, 0.0};

// Dense FLOP per SM and clock by architecture (FMA = 2 FLOP): FP32 units, TF32 and BF16 tensor
// cores. 0 = unknown or absent.
struct PerSm {
  double fp32, tf32, bf16;
};
PerSm per_sm(int major, int minor) {
  if (major == 6) return {minor == 0 ? 128.0 : 256.0, 0, 0};
  if (major == 7) return {128.0, 0, 0};
  if (major == 8 && minor == 0) return {128.0, 1024.0, 2048.0};
  if (major == 8) return {256.0, 512.0, 1024.0};
  if (major == 9) return {256.0, 2048.0, 4096.0};
  return {0, 0, 0};
}

double pick(std::string_view precision, double fp32, double tf32, double bf16) {
  if (precision == "tf32") return tf32;
  if (precision == "bf16") return bf16;
  return fp32;
}

}  // namespace

std::optional<PeakFlops> device_peak(const DeviceInfo& device, std::string_view precision) {
  const SpecSheet* sheet = nullptr;
  for (const SpecSheet& s : kSpecSheets) {
    if (device.name.find(s.name) != std::string::npos) {
      sheet = &s;
      break;
    }
  }
  if (sheet == nullptr && device.name.find(kP100Pcie.name) != std::string::npos) sheet = &kP100Pcie;
  if (sheet != nullptr) {
    const double tflops = pick(precision, sheet->fp32, sheet->tf32, sheet->bf16);
    if (tflops > 0) {
      return PeakFlops{tflops * 1e12, fmt::format("{} datasheet, {} dense: {:.1f} TFLOP/s",
                                                  sheet->name, precision, tflops)};
    }
    return std::nullopt;
  }
  const PerSm rate = per_sm(device.major, device.minor);
  const double per_clock = pick(precision, rate.fp32, rate.tf32, rate.bf16);
  if (per_clock <= 0 || device.sm_count <= 0 || device.clock_khz <= 0) return std::nullopt;
  const double flops = per_clock * device.sm_count * device.clock_khz * 1e3;
  return PeakFlops{flops, fmt::format("estimate for sm_{}{} {}: {} SMs x {} MHz x {} FLOP/clock "
                                      "= {:.1f} TFLOP/s",
                                      device.major, device.minor, precision, device.sm_count,
                                      device.clock_khz / 1000, per_clock, flops / 1e12)};
}

}  // namespace chimera::backend::cuda
