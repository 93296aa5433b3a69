#pragma once
// Building blocks shared by the kernels: launch shapes and fixed-order reductions (the result of
// a reduction depends only on the sizes, never on timing: no atomics).
#include <cuda_runtime.h>

#include <cstdint>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cuda {

inline constexpr int kThreads = 256;  // threads per block of the elementwise kernels
inline constexpr int kWarp = 32;

// Blocks for a grid-stride loop over n elements: enough to fill any GPU, never more than needed.
inline unsigned grid_for(Index n, int threads = kThreads) {
  const Index blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

// Butterfly sum over the 32 lanes of a warp; every lane gets the same bits.
template <typename T>
__device__ inline T warp_sum(T x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    x += __shfl_xor_sync(0xffffffffU, x, offset);
  return x;
}

__device__ inline float warp_max(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffU, x, offset));
  }
  return x;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds at least 32 values.
template <typename T>
__device__ inline T block_sum(T x, T* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  x = warp_sum(x);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : T(0);
  return warp_sum(x);
}

}  // namespace chimera::backend::cuda
