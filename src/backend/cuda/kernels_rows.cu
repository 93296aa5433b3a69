// Row kernels: LayerNorm (rows of C), the causal attention softmax (rows of T), and the fused
// softmax + cross-entropy of the head (rows of V). Short rows take one warp each, vocabulary rows
// one block each; every reduction is a fixed butterfly, so results are reproducible.
#include <cmath>

#include "cuda_check.hpp"
#include "device_utils.cuh"
#include "kernels.hpp"

namespace chimera::backend::cuda {

namespace {

constexpr float kLayerNormEps = 1e-5F;  // GPT-2's layer_norm_epsilon
constexpr int kRowsPerBlock = 8;        // warps per block of the warp-per-row kernels
constexpr int kVocabThreads = 512;      // threads per vocabulary row

// The warp of this thread and its row, for the warp-per-row kernels.
__device__ inline Index warp_row() {
  return static_cast<Index>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
}

unsigned row_blocks(Index rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, Index N, Index C) {
  const Index r = warp_row();
  if (r >= N) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const float inv_c = 1.0F / static_cast<float>(C);
  const float* x = inp + r * C;
  float sum = 0.0F;
  for (Index i = lane; i < C; i += kWarp) sum += x[i];
  const float m = warp_sum(sum) * inv_c;
  float sq = 0.0F;
  for (Index i = lane; i < C; i += kWarp) sq += (x[i] - m) * (x[i] - m);
  const float s = 1.0F / sqrtf(warp_sum(sq) * inv_c + kLayerNormEps);
  float* y = out + r * C;
  for (Index i = lane; i < C; i += kWarp) y[i] = (x[i] - m) * s * weight[i] + bias[i];
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

// With n = (x - m) s and dn = weight * dy:  dx = s (dn - mean(dn) - n mean(dn n)) (+ dresidual).
__global__ void layernorm_backward_input_kernel(float* dinp, const float* dresidual,
                                                const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, Index N, Index C) {
  const Index r = warp_row();
  if (r >= N) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const float inv_c = 1.0F / static_cast<float>(C);
  const float* x = inp + r * C;
  const float* dy = dout + r * C;
  const float m = mean[r];
  const float s = rstd[r];
  float dn_sum = 0.0F, dn_n_sum = 0.0F;
  for (Index i = lane; i < C; i += kWarp) {
    const float dn = weight[i] * dy[i];
    dn_sum += dn;
    dn_n_sum += dn * ((x[i] - m) * s);
  }
  const float dn_mean = warp_sum(dn_sum) * inv_c;
  const float dn_n_mean = warp_sum(dn_n_sum) * inv_c;
  float* dx = dinp + r * C;
  const float* res = dresidual != nullptr ? dresidual + r * C : nullptr;
  for (Index i = lane; i < C; i += kWarp) {
    const float n = (x[i] - m) * s;
    const float grad = (weight[i] * dy[i] - dn_mean - n * dn_n_mean) * s;
    dx[i] = res != nullptr ? res[i] + grad : grad;  // each lane reads res[i] before it writes dx[i]
  }
}

__global__ void causal_softmax_forward_kernel(float* att, Index rows, Index T) {
  const Index r = warp_row();
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const Index t = r % T;
  float* p = att + r * T;
  float max = -INFINITY;
  for (Index i = lane; i <= t; i += kWarp) max = fmaxf(max, p[i]);
  max = warp_max(max);
  float sum = 0.0F;
  for (Index i = lane; i <= t; i += kWarp) {
    const float e = expf(p[i] - max);
    p[i] = e;
    sum += e;
  }
  const float inv_sum = 1.0F / warp_sum(sum);
  for (Index i = lane; i <= t; i += kWarp) p[i] *= inv_sum;
  for (Index i = t + 1 + lane; i < T; i += kWarp) p[i] = 0.0F;
}

__global__ void causal_softmax_backward_kernel(float* datt, const float* att, Index rows, Index T) {
  const Index r = warp_row();
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const Index t = r % T;
  const float* p = att + r * T;
  float* d = datt + r * T;
  float dot = 0.0F;
  for (Index i = lane; i <= t; i += kWarp) dot += p[i] * d[i];
  dot = warp_sum(dot);
  for (Index i = lane; i <= t; i += kWarp) d[i] = p[i] * (d[i] - dot);
  for (Index i = t + 1 + lane; i < T; i += kWarp) d[i] = 0.0F;
}

// One running (max, sum of exp(x - max)) pair per thread, merged in a fixed tree: one pass over
// the row for the normaliser, one to write the probabilities.
struct MaxSum {
  float max;
  float sum;
};

__device__ inline MaxSum merge(MaxSum a, MaxSum b) {
  if (a.sum == 0.0F) return b;  // an empty part (max = -inf) contributes nothing
  if (b.sum == 0.0F) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ inline MaxSum warp_merge(MaxSum x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffU, x.max, offset),
                       __shfl_xor_sync(0xffffffffU, x.sum, offset)};
    x = merge(x, other);
  }
  return x;
}

__global__ void softmax_cross_entropy_forward_kernel(float* logits, float* losses,
                                                     const std::int32_t* targets, Index V,
                                                     Index ld) {
  __shared__ float shared_max[kVocabThreads / kWarp];
  __shared__ float shared_sum[kVocabThreads / kWarp];
  const Index r = blockIdx.x;
  float* x = logits + r * ld;
  const float target_logit = x[targets[r]];  // read before any thread overwrites the row
  MaxSum part{-INFINITY, 0.0F};
  for (Index i = threadIdx.x; i < V; i += kVocabThreads) {
    const float v = x[i];
    if (v > part.max) {
      part.sum = part.sum * expf(part.max - v) + 1.0F;
      part.max = v;
    } else {
      part.sum += expf(v - part.max);
    }
  }
  part = warp_merge(part);
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int warp = static_cast<int>(threadIdx.x / kWarp);
  if (lane == 0) {
    shared_max[warp] = part.max;
    shared_sum[warp] = part.sum;
  }
  __syncthreads();
  MaxSum all{-INFINITY, 0.0F};
  if (lane < kVocabThreads / kWarp) all = MaxSum{shared_max[lane], shared_sum[lane]};
  all = warp_merge(all);
  // -log softmax(x)[target] = log(sum exp(x - max)) + max - x[target]
  if (threadIdx.x == 0) losses[r] = (logf(all.sum) + all.max) - target_logit;
  const float inv_sum = 1.0F / all.sum;
  for (Index i = threadIdx.x; i < V; i += kVocabThreads) x[i] = expf(x[i] - all.max) * inv_sum;
}

__global__ void softmax_cross_entropy_backward_kernel(float* probs, const std::int32_t* targets,
                                                      Index N, Index ld) {
  for (Index r = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; r < N;
       r += static_cast<Index>(gridDim.x) * blockDim.x) {
    probs[r * ld + targets[r]] -= 1.0F;
  }
}

}  // namespace

void launch_layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, Index N,
                              Index C) {
  if (N == 0) return;
  layernorm_forward_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

void launch_layernorm_backward_input(cudaStream_t stream, float* dinp, const float* dresidual,
                                     const float* dout, const float* inp, const float* weight,
                                     const float* mean, const float* rstd, Index N, Index C) {
  if (N == 0) return;
  layernorm_backward_input_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(
      dinp, dresidual, dout, inp, weight, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
}

void launch_causal_softmax_forward(cudaStream_t stream, float* att, Index rows, Index T) {
  if (rows == 0) return;
  causal_softmax_forward_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, stream>>>(att, rows,
                                                                                        T);
  CUDA_CHECK_LAUNCH();
}

void launch_causal_softmax_backward(cudaStream_t stream, float* datt, const float* att, Index rows,
                                    Index T) {
  if (rows == 0) return;
  causal_softmax_backward_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, stream>>>(datt, att,
                                                                                         rows, T);
  CUDA_CHECK_LAUNCH();
}

void launch_softmax_cross_entropy_forward(cudaStream_t stream, float* logits, float* losses,
                                          const std::int32_t* targets, Index N, Index V, Index ld) {
  if (N == 0) return;
  softmax_cross_entropy_forward_kernel<<<static_cast<unsigned>(N), kVocabThreads, 0, stream>>>(
      logits, losses, targets, V, ld);
  CUDA_CHECK_LAUNCH();
}

void launch_softmax_cross_entropy_backward(cudaStream_t stream, float* probs,
                                           const std::int32_t* targets, Index N, Index ld) {
  if (N == 0) return;
  softmax_cross_entropy_backward_kernel<<<grid_for(N), kThreads, 0, stream>>>(probs, targets, N,
                                                                              ld);
  CUDA_CHECK_LAUNCH();
}

}  // namespace chimera::backend::cuda
