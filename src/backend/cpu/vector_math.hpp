#pragma once
// Scalar building blocks of the CPU kernels, written so that the compiler vectorises them and so
// that every result depends only on the input values (never on vector width, alignment or
// threads): reductions use kLanes interleaved partial sums combined by a fixed tree, and exp/tanh
// use the same arithmetic in every lane.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

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

// kLanes floats as one GCC vector: the compiler maps it onto the machine's registers (one zmm,
// two ymm or four xmm) and every lane does exactly the scalar arithmetic, so a loop over
// FloatLanes gives the same bits as the scalar loop with kLanes partial results. GCC does not
// vectorise those scalar loops itself where kLanes floats take more than one register (AVX2).
using FloatLanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using IntLanes = std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t))));

inline FloatLanes load_lanes(const float* p) {
  FloatLanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_lanes(float* p, const FloatLanes& v) {
  std::memcpy(p, &v, sizeof v);
}

// value in every lane of F (float or FloatLanes)
template <typename F>
inline F splat(float value) {
  return F{} + value;
}

// std::max(x, lo) and std::min(x, hi), NaN handling included, for floats and lanes.
template <typename F>
inline F max_of(F x, F lo) {
  return x < lo ? lo : x;
}
template <typename F>
inline F min_of(F x, F hi) {
  return hi < x ? hi : x;
}

// The fixed tree that combines kLanes partial results.
template <typename Combine>
inline float combine_lanes(FloatLanes acc, Combine combine) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] = combine(acc[l], acc[l + width]);
  }
  return acc[0];
}

inline float ordered_max(const float* x, Index n) {
  FloatLanes acc = splat<FloatLanes>(-INFINITY);
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = max_of(acc, load_lanes(x + i));
  for (int l = 0; i < n; ++i, ++l) acc[l] = max_of(acc[l], x[i]);
  return combine_lanes(acc, [](float a, float b) { return max_of(a, b); });
}

// 2^k for integral k in [-126, 127], in every lane.
inline float power_of_two(float k) {
  return std::bit_cast<float>((static_cast<std::int32_t>(k) + 127) << 23);
}
inline FloatLanes power_of_two(FloatLanes k) {
  return std::bit_cast<FloatLanes>((__builtin_convertvector(k, IntLanes) + 127) << 23);
}

// exp(x) for x in [-87.3, 88] within about 1 ulp (Cephes' expf polynomial); arguments outside
// are clamped, so exp(-100) gives 1.2e-38 instead of 3.7e-44 (harmless in a softmax, where the
// largest term is 1). F is float or FloatLanes: the same operations either way.
template <typename F>
inline F fast_exp(F x) {
  x = min_of(max_of(x, splat<F>(-87.3F)), splat<F>(88.0F));
  // k = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer in round-to-nearest mode.
  constexpr float kRound = 12582912.0F;
  const F k = (x * 1.44269504088896341F + kRound) - kRound;
  // r = x - k ln 2 in two steps (Cody-Waite), |r| <= ln(2) / 2.
  F r = x - k * 0.693359375F;
  r = r - k * -2.12194440e-4F;
  F p = splat<F>(1.9875691500e-4F);
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * (r * r) + r + 1.0F;
  return p * power_of_two(k);
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); absolute error below 2e-7.
inline float fast_tanh(float x) {
  const float e = fast_exp(2.0F * std::fabs(x));
  return std::copysign(1.0F - 2.0F / (e + 1.0F), x);
}

// In place: x[0..n) becomes exp(x - max); returns the ordered sum of those values (the softmax's
// denominator), in ordered_sum's order.
inline float exponentiate_in_place(float* x, Index n, float max) {
  FloatLanes acc{};
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const FloatLanes e = fast_exp(load_lanes(x + i) - max);
    store_lanes(x + i, e);
    acc += e;
  }
  for (int l = 0; i < n; ++i, ++l) {
    const float e = fast_exp(x[i] - max);
    x[i] = e;
    acc[l] += e;
  }
  return combine_lanes(acc, [](float a, float b) { return a + b; });
}

}  // namespace chimera::backend::cpu
