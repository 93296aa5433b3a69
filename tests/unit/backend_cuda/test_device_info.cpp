// The CUDA backend's pure functions (no GPU needed): the peak table behind MFU figures.
#include <gtest/gtest.h>

#include "cuda/device_info.hpp"

namespace chimera::backend::cuda {
namespace {

TEST(DevicePeak, DatasheetFiguresByNameMostSpecificFirst) {
  DeviceInfo h200{"NVIDIA H200", 9, 0, 132, 1980000, 0, ""};
  EXPECT_DOUBLE_EQ(device_peak(h200, "bf16")->flops_per_s, 989.4e12);
  EXPECT_DOUBLE_EQ(device_peak(h200, "fp32")->flops_per_s, 66.9e12);
  DeviceInfo pcie{"NVIDIA H100 PCIe", 9, 0, 114, 1755000, 0, ""};
  EXPECT_DOUBLE_EQ(device_peak(pcie, "bf16")->flops_per_s, 756.0e12);
  DeviceInfo p100{"Tesla P100-PCIE-16GB", 6, 0, 56, 1328500, 0, ""};
  EXPECT_DOUBLE_EQ(device_peak(p100, "fp32")->flops_per_s, 9.3e12);
  EXPECT_FALSE(device_peak(p100, "bf16").has_value()) << "P100 has no bf16 tensor cores";
}

TEST(DevicePeak, EstimateFromSmsAndClockForUnlistedGpus) {
  DeviceInfo unknown{"Some Hopper", 9, 0, 100, 1000000, 0, ""};
  const auto peak = device_peak(unknown, "bf16");
  ASSERT_TRUE(peak.has_value());
  EXPECT_DOUBLE_EQ(peak->flops_per_s, 4096.0 * 100 * 1e9);
  EXPECT_NE(peak->source.find("estimate"), std::string::npos) << peak->source;
  DeviceInfo future{"Future GPU", 12, 0, 100, 1000000, 0, ""};
  EXPECT_FALSE(device_peak(future, "bf16").has_value());
}

}  // namespace
}  // namespace chimera::backend::cuda
