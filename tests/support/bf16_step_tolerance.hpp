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

}  // namespace chimera::testing
