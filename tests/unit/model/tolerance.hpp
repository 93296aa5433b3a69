#pragma once
// Comparisons of a tensor with a reference.
//  expect_close:       |a_i - b_i| <= tol * (|b_i| + rms(b)) for every element: relative per
//                      element, with the tensor's own scale as the floor for elements near zero.
//  expect_close_norm:  ||a - b||_2 <= tol * ||b||_2: the tensor's relative error as a whole.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>

namespace chimera::model {

inline void expect_close(std::span<const float> actual, std::span<const float> expected, double tol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double sum_sq = 0;
  for (const float e : expected) sum_sq += static_cast<double>(e) * e;
  const double rms = std::sqrt(sum_sq / static_cast<double>(expected.size()));
  std::size_t worst = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double ratio = err / (std::abs(static_cast<double>(expected[i])) + rms);
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_LE(worst_ratio, tol) << what << ": element " << worst << " is " << actual[worst]
                              << ", expected " << expected[worst] << " (tensor rms " << rms << ")";
}

inline void expect_close_norm(std::span<const float> actual, std::span<const float> expected,
                              double tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double err_sq = 0, ref_sq = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    err_sq += d * d;
    ref_sq += static_cast<double>(expected[i]) * expected[i];
  }
  EXPECT_LE(std::sqrt(err_sq), tol * std::sqrt(ref_sq))
      << what << ": relative 2-norm error " << std::sqrt(err_sq / ref_sq);
}

}  // namespace chimera::model
