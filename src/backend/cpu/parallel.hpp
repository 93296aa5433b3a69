#pragma once
// How the CPU kernels split work between OpenMP threads without making results depend on the
// split: rows and elements are independent; column reductions give each thread whole columns.
#include <algorithm>

#include "vector_math.hpp"

namespace chimera::backend::cpu {

// Kernels with less work than this many elements run on one thread. Waking the team costs
// microseconds on an idle machine, but a whole scheduler slice on a busy one (the woken thread
// waits for a CPU while the other waits for it), so the [B*T, C] row kernels of the benchmark
// model (2^18 elements, about 0.1 ms each) stay on one thread; [B*T, 4C] and larger go parallel.
inline constexpr Index kParallelMinElements = Index{1} << 19;

// Large elementwise loops hand out chunks of this many elements dynamically, so that a thread the
// OS deschedules (on a machine shared with other jobs) does not hold up the other threads.
inline constexpr Index kDynamicChunk = 1 << 16;

// out[i] = op(a[i], b[i]) for i < n (b may be null: op then gets zeros), in whole FloatVectors
// split statically between threads, then the scalar tail. op takes floats or FloatVectors and
// does the same arithmetic on both, so the split into vectors changes no bit.
template <typename Op>
inline void map_elements(float* out, const float* a, const float* b, Index n, Op op) {
  const Index vectors = n / kVectorLanes;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (Index v = 0; v < vectors; ++v) {
    const Index i = v * kVectorLanes;
    const FloatVector y = b != nullptr ? load_vector(b + i) : FloatVector{};
    store_vector(out + i, op(load_vector(a + i), y));
  }
  for (Index i = vectors * kVectorLanes; i < n; ++i) out[i] = op(a[i], b != nullptr ? b[i] : 0.0F);
}

struct ColumnRange {
  Index begin;
  Index end;
};

// Columns of a C-wide matrix owned by thread `thread` of `threads`: contiguous groups of kLanes
// columns (the last group may be partial), as even as the groups allow.
inline ColumnRange column_range(Index C, int thread, int threads) {
  const Index groups = (C + kLanes - 1) / kLanes;
  const Index first = groups * thread / threads;
  const Index last = groups * (thread + 1) / threads;
  return {std::min(C, first * kLanes), std::min(C, last * kLanes)};
}

}  // namespace chimera::backend::cpu
