#pragma once
// bf16 (1 sign, 8 exponent, 7 mantissa bits: the upper half of an fp32) and the conversions the
// CPU backend's bf16 GEMMs use. Rounding is to nearest, ties to even, as in the hardware's
// conversion instructions (AVX-512-BF16 vcvtneps2bf16) and PyTorch's; NaNs stay quiet NaNs.
#include <bit>
#include <cstdint>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cpu {

using Bf16Bits = std::uint16_t;

inline Bf16Bits to_bf16_bits(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7FFFFFFFU) > 0x7F800000U) return static_cast<Bf16Bits>((bits >> 16) | 0x0040U);
  const std::uint32_t tie_to_even = 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<Bf16Bits>((bits + tie_to_even) >> 16);
}

inline float from_bf16_bits(Bf16Bits b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// x rounded to the nearest bf16 value, kept in an fp32.
inline float round_to_bf16(float x) {
  return from_bf16_bits(to_bf16_bits(x));
}

// dst (rows x cols, dense: row stride cols) = src (row stride ld) rounded to bf16, either as bf16
// bits or as fp32 values. Splits rows between OpenMP threads when `parallel` and large.
void convert_to_bf16(Bf16Bits* dst, const float* src, Index rows, Index cols, Index ld,
                     bool parallel);
void round_to_bf16(float* dst, const float* src, Index rows, Index cols, Index ld, bool parallel);

}  // namespace chimera::backend::cpu
