#pragma once
// Building blocks of the CPU kernels: scalar loops that the compiler vectorises, and explicit
// 8-float vectors where it does not, written so that every result depends only on the input
// values (never on vector width, alignment or threads): reductions use kLanes interleaved partial
// sums combined by a fixed tree, and exp/tanh use the same arithmetic in every lane.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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

// Floats as one GCC vector the width of a vector register: 16 with AVX-512, else 8 (one AVX
// register; GCC splits it on narrower ISAs). Every lane does exactly the scalar arithmetic, so
// kVectors of them side by side give the same bits as the scalar loops with kLanes partial
// results, which GCC does not vectorise itself where kLanes floats take more than one register.
// (A single 16-float vector is no use without AVX-512: GCC compares it element by element.)
#if defined(__AVX512F__)
inline constexpr int kVectorLanes = 16;
#else
inline constexpr int kVectorLanes = 8;
#endif
inline constexpr int kVectors = kLanes / kVectorLanes;
using FloatVector = float __attribute__((vector_size(kVectorLanes * sizeof(float))));
using IntVector = std::int32_t __attribute__((vector_size(kVectorLanes * sizeof(std::int32_t))));

inline FloatVector load_vector(const float* p) {
  FloatVector v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_vector(float* p, const FloatVector& v) {
  std::memcpy(p, &v, sizeof v);
}

// value in every lane of F (float or FloatVector)
template <typename F>
inline F splat(float value) {
  return F{} + value;
}

// std::max(x, lo) and std::min(x, hi), NaN handling included, for floats and vectors.
template <typename F>
inline F max_of(F x, F lo) {
  return x < lo ? lo : x;
}
template <typename F>
inline F min_of(F x, F hi) {
  return hi < x ? hi : x;
}

// kLanes partial results, lane l in acc[l / kVectorLanes][l % kVectorLanes], combined by the
// fixed tree of ordered_sum.
template <typename Combine>
inline float combine_lanes(const FloatVector (&acc)[kVectors], Combine combine) {
  float lanes[kLanes];
  std::memcpy(lanes, acc, sizeof lanes);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] = combine(lanes[l], lanes[l + width]);
  }
  return lanes[0];
}

inline float& lane(FloatVector (&acc)[kVectors], int l) {
  return reinterpret_cast<float*>(acc)[l];
}

inline float ordered_max(const float* x, Index n) {
  FloatVector acc[kVectors];
  for (auto& a : acc) a = splat<FloatVector>(-INFINITY);
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int v = 0; v < kVectors; ++v)
      acc[v] = max_of(acc[v], load_vector(x + i + v * kVectorLanes));
  }
  for (int l = 0; i < n; ++i, ++l) lane(acc, l) = max_of(lane(acc, l), x[i]);
  return combine_lanes(acc, [](float a, float b) { return max_of(a, b); });
}

// 2^k for integral k in [-126, 127], in every lane.
inline float power_of_two(float k) {
  return std::bit_cast<float>((static_cast<std::int32_t>(k) + 127) << 23);
}
inline FloatVector power_of_two(FloatVector k) {
  return std::bit_cast<FloatVector>((__builtin_convertvector(k, IntVector) + 127) << 23);
}

// exp(x) for x in [-87.3, 88] within about 1 ulp (Cephes' expf polynomial); arguments outside
// are clamped, so exp(-100) gives 1.2e-38 instead of 3.7e-44 (harmless in a softmax, where the
// largest term is 1). F is float or FloatVector: the same operations either way.
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

// |x| and copysign(magnitude, sign), bit for bit as std::fabs and std::copysign.
inline float abs_of(float x) {
  return std::fabs(x);
}
inline FloatVector abs_of(FloatVector x) {
  return std::bit_cast<FloatVector>(std::bit_cast<IntVector>(x) & 0x7fffffff);
}
inline float copysign_of(float magnitude, float sign) {
  return std::copysign(magnitude, sign);
}
inline FloatVector copysign_of(FloatVector magnitude, FloatVector sign) {
  const IntVector sign_bit = std::bit_cast<IntVector>(sign) & std::numeric_limits<int>::min();
  return std::bit_cast<FloatVector>((std::bit_cast<IntVector>(magnitude) & 0x7fffffff) | sign_bit);
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); absolute error below 2e-7. F: float or FloatVector.
template <typename F>
inline F fast_tanh(F x) {
  const F e = fast_exp(2.0F * abs_of(x));
  return copysign_of(1.0F - 2.0F / (e + 1.0F), x);
}

// In place: x[0..n) becomes exp(x - max); returns the ordered sum of those values (the softmax's
// denominator), in ordered_sum's order.
inline float exponentiate_in_place(float* x, Index n, float max) {
  FloatVector acc[kVectors] = {};
  Index i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int v = 0; v < kVectors; ++v) {
      float* p = x + i + v * kVectorLanes;
      const FloatVector e = fast_exp(load_vector(p) - max);
      store_vector(p, e);
      acc[v] += e;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const float e = fast_exp(x[i] - max);
    x[i] = e;
    lane(acc, l) += e;
  }
  return combine_lanes(acc, [](float a, float b) { return a + b; });
}

}  // namespace chimera::backend::cpu
