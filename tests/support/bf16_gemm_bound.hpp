#pragma once
// The error bound of a GEMM with bf16 operands and fp32 accumulation, from rounding analysis; the
// CPU backend's bf16 paths and the CUDA backend's bf16 tensor cores are held to the same bound.
//
// Each operand is rounded to bf16 (8 significant bits, round to nearest: unit roundoff
// u = 2^-8), so a product a*b becomes a*b*(1+d1)(1+d2), off by at most (2u + u^2)|a||b|; the
// product of two bf16 values is exact in fp32. Summing k products in fp32 in any order adds at most
// gamma_k = k*2^-24/(1 - k*2^-24) times the sum of their magnitudes, and alpha and beta*C one
// rounding each. So, with S_ij = sum_p |a_ip| |b_pj|:
//   |C_bf16 - C_exact|_ij <= |alpha| ((2u + u^2) + gamma_{k+2} (1 + u)^2) S_ij + gamma_2 |beta
//   C_ij|
// The bound is attained only by adversarial inputs; random ones land near sqrt(k) times less.
#include <cmath>
#include <cstddef>
#include <vector>

namespace chimera::testing {

inline constexpr double kBf16UnitRoundoff = 1.0 / 256.0;       // 2^-8
inline constexpr double kFp32UnitRoundoff = 1.0 / 16777216.0;  // 2^-24

inline double fp32_gamma(double terms) {
  const double t = terms * kFp32UnitRoundoff;
  return t / (1.0 - t);
}

// The bound above for one element of C.
inline double bf16_gemm_bound(double alpha, double abs_product_sum, double beta, double c_in,
                              long k) {
  const double u = kBf16UnitRoundoff;
  const double operands = 2 * u + u * u;
  const double sums = fp32_gamma(static_cast<double>(k) + 2) * (1 + u) * (1 + u);
  return std::abs(alpha) * (operands + sums) * abs_product_sum +
         fp32_gamma(2) * std::abs(beta * c_in);
}

}  // namespace chimera::testing
