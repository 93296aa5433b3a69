#pragma once
// Scalar building blocks of the CPU kernels, written so that the compiler vectorises them and so
// that every result depends only on the input values (never on vector width, alignment or
// threads): reductions use kLanes interleaved partial sums combined by a fixed tree, and exp/tanh
// use the same arithmetic in every lane.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cpu {

inline constexpr int kLanes = 16;

// sum_{i < n} term(i): lane l accumulates the terms i with i % kLanes == l, in increasing i.
template <typename Term>
inline float ordered_sum(Index n, Term term) {
  float acc[kLanes] = {};
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += term(i + l);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += term(i);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

inline float ordered_max(const float* x, Index n) {
  float acc[kLanes];
  std::fill(acc, acc + kLanes, -INFINITY);
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] = std::max(acc[l], x[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] = std::max(acc[l], x[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] = std::max(acc[l], acc[l + width]);
  }
  return acc[0];
}

// exp(x) for x in [-87.3, 88] within about 1 ulp (Cephes' expf polynomial); arguments outside
// are clamped, so exp(-100) gives 1.2e-38 instead of 3.7e-44 (harmless in a softmax, where the
// largest term is 1).
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.3F), 88.0F);
  // k = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer in round-to-nearest mode.
  constexpr float kRound = 12582912.0F;
  const float k = (x * 1.44269504088896341F + kRound) - kRound;
  // r = x - k ln 2 in two steps (Cody-Waite), |r| <= ln(2) / 2.
  float r = x - k * 0.693359375F;
  r = r - k * -2.12194440e-4F;
  float p = 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * (r * r) + r + 1.0F;
  const std::int32_t exponent = (static_cast<std::int32_t>(k) + 127) << 23;
  return p * std::bit_cast<float>(exponent);
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); absolute error below 2e-7.
inline float fast_tanh(float x) {
  const float e = fast_exp(2.0F * std::fabs(x));
  return std::copysign(1.0F - 2.0F / (e + 1.0F), x);
}

// In place: x[0..n) becomes exp(x - max); returns the ordered sum of those values (the softmax's
// denominator).
inline float exponentiate_in_place(float* x, Index n, float max) {
  return ordered_sum(n, [x, max](Index i) {
    const float e = fast_exp(x[i] - max);
    x[i] = e;
    return e;
  });
}

}  // namespace chimera::backend::cpu
