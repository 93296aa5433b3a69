// Matrix conversions to bf16; GCC vectorises the per-element rounding (integer arithmetic only).
#include "bf16.hpp"

#include "parallel.hpp"

namespace chimera::backend::cpu {

namespace {

template <typename Out, typename Convert>
void convert_rows(Out* dst, const float* src, Index rows, Index cols, Index ld, bool parallel,
                  Convert convert) {
#pragma omp parallel for schedule(static) if (parallel && rows * cols >= kParallelMinElements)
  for (Index r = 0; r < rows; ++r) {
    const float* in = src + r * ld;
    Out* out = dst + r * cols;
    for (Index j = 0; j < cols; ++j) out[j] = convert(in[j]);
  }
}

}  // namespace

void convert_to_bf16(Bf16Bits* dst, const float* src, Index rows, Index cols, Index ld,
                     bool parallel) {
  convert_rows(dst, src, rows, cols, ld, parallel, [](float x) { return to_bf16_bits(x); });
}

void round_to_bf16(float* dst, const float* src, Index rows, Index cols, Index ld, bool parallel) {
  convert_rows(dst, src, rows, cols, ld, parallel, [](float x) { return round_to_bf16(x); });
}

}  // namespace chimera::backend::cpu
