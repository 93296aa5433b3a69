#pragma once
// How far one training step (forward + backward) with bf16 GEMMs lands from the same step in
// fp32: the CPU's bf16 and bf16-emulated paths and the CUDA backend's bf16 tensor cores alike
// (operands rounded to bf16, products summed in fp32; every other kernel in fp32).
//
// Rounding an operand to bf16 changes each element by at most u = 2^-8 relative
// (bf16_gemm_bound.hpp), independently from element to element, so a GEMM's output carries a
// norm-wise relative error of order u (the fp32 sums add only ~2^-24 per term). A gradient is the
// end of a chain of such GEMMs, forward through the blocks and the head and back; independent
// errors add in quadrature, so a chain of the ~10-20 GEMMs of a small model stays at a small
// multiple of u. Measured on test_bf16_step's 2-block GPT-2: logits 0.74u, gradient tensors 0.6u
// to 1.5u (up to 1.9u with 4 blocks). 5u leaves a margin over 3x; operands rounded to 2 bits
// fewer than bf16 exceed it (6u and more), 1 bit fewer does not (2.9u).
#include "bf16_gemm_bound.hpp"

namespace chimera::testing {

// ||x_bf16 - x_fp32||_2 / ||x_fp32||_2 of every gradient tensor and of the logits.
inline constexpr double kBf16StepTol = 5 * kBf16UnitRoundoff;
// The worst gradient tensor's error is at least this, so the operands really lost bf16's bits:
// with tf32's 10 mantissa bits the same step measures 0.18u, with bf16's 7 bits 1.5u.
inline constexpr double kBf16StepMinError = kBf16UnitRoundoff / 4;

// Parameters after 3 AdamW steps of two runs with bf16 GEMMs that differ only in the order of
// their fp32 sums (a pipeline against one process, or another device), ||a - b||_2 / ||b||_2.
// In fp32 such runs stay ~1e-6 apart. Rounding to bf16 is a step function: a value that differs
// by a relative d between the runs lands on another bf16 value (one ulp, 2u, away) with
// probability about d / 2u, a norm-wise difference of about sqrt(2u d). Each step feeds the last
// step's difference through that again: 1e-6 becomes ~1e-4, then ~1e-3. Measured on the runtime's
// equality test (tiny GPT-2, every scheme and layout at 2, 4 and 8 ranks): 1e-5 to 7.6e-4 where
// the order differs, 0 where it does not; the losses stay within 4e-6 and keep fp32's 1e-5.
inline constexpr double kBf16ReorderedSumsTol = 3e-3;

}  // namespace chimera::testing
