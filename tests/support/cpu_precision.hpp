#pragma once
// Tests that run at several CPU GEMM precisions (runtime.precision): the parameter's test name,
// and the skip of the bf16 cases, saying why, on a CPU without bf16 units.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cpu/cpu_backend.hpp"

namespace chimera::testing {

// "bf16-emulated" -> "bf16_emulated" (test names take letters, digits and underscores).
inline std::string precision_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace chimera::testing

// In a test body or SetUp: skips when `precision` is bf16 and this CPU cannot run it.
#define CHIMERA_SKIP_UNLESS_CPU_RUNS(precision)                           \
  do {                                                                    \
    if ((precision) == std::string("bf16")) {                             \
      if (const auto why = ::chimera::backend::cpu::bf16_unsupported()) { \
        GTEST_SKIP() << "bf16: " << *why;                                 \
      }                                                                   \
    }                                                                     \
  } while (false)
