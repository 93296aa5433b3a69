// Elementwise kernels: accumulation, bias broadcast, GELU, AdamW, and the embedding tables.
#include "cuda_check.hpp"
#include "device_utils.cuh"
#include "kernels.hpp"

namespace chimera::backend::cuda {

namespace {

constexpr float kGeluScale = 0.7978845608028654F;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715F;

#define CHIMERA_GRID_STRIDE(i, n)                                                    \
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<Index>(gridDim.x) * blockDim.x)

__global__ void accumulate_kernel(float* dst, const float* src, Index n) {
  CHIMERA_GRID_STRIDE(i, n) dst[i] += src[i];
}

__global__ void broadcast_bias_kernel(float* out, const float* residual, const float* bias, Index N,
                                      Index C) {
  CHIMERA_GRID_STRIDE(i, N * C) {
    const float b = bias[i % C];
    out[i] = residual != nullptr ? residual[i] + b : b;
  }
}

__global__ void gelu_forward_kernel(float* out, const float* inp, Index n) {
  CHIMERA_GRID_STRIDE(i, n) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = 0.5F * x * (1.0F + tanhf(u));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, Index n) {
  CHIMERA_GRID_STRIDE(i, n) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float t = tanhf(u);
    const float du_dx = kGeluScale * (1.0F + 3.0F * kGeluCubic * x * x);
    const float grad = 0.5F * (1.0F + t) + 0.5F * x * (1.0F - t * t) * du_dx;
    dinp[i] = grad * dout[i];
  }
}

// The operations of torch.optim.AdamW (and of the CPU backend) one by one, each rounded on its
// own (the _rn intrinsics forbid fused multiply-adds): the update is bit-identical to the CPU's.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, Index n,
                             AdamWArgs a) {
  CHIMERA_GRID_STRIDE(i, n) {
    const float g = __fmul_rn(grads[i], a.grad_scale);
    const float p = __fmul_rn(params[i], a.decay_factor);
    const float mi = __fadd_rn(__fmul_rn(m[i], a.beta1), __fmul_rn(g, a.one_minus_beta1));
    const float vi =
        __fadd_rn(__fmul_rn(v[i], a.beta2), __fmul_rn(__fmul_rn(g, g), a.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), a.bias_correction2_sqrt), a.eps);
    params[i] = __fsub_rn(p, __fmul_rn(a.step_size, __fdiv_rn(mi, denom)));
    m[i] = mi;
    v[i] = vi;
  }
}

__global__ void embedding_forward_kernel(float* out, const std::int32_t* tokens, const float* wte,
                                         const float* wpe, Index T, Index C, Index n) {
  CHIMERA_GRID_STRIDE(i, n) {
    const Index bt = i / C, c = i % C;
    out[i] = wte[static_cast<Index>(tokens[bt]) * C + c] + wpe[(bt % T) * C + c];
  }
}

__global__ void position_embedding_backward_kernel(float* dwpe, const float* dout, Index B, Index T,
                                                   Index C) {
  CHIMERA_GRID_STRIDE(i, T * C) {
    float acc = dwpe[i];
    for (Index b = 0; b < B; ++b) acc += dout[b * T * C + i];
    dwpe[i] = acc;
  }
}

// Block x: one distinct token; threads: columns. The additions into a row happen in position
// order, as on the CPU.
__global__ void token_embedding_backward_kernel(float* dwte, const float* dout,
                                                const std::int32_t* tokens,
                                                const std::int32_t* offsets,
                                                const std::int32_t* positions, Index C) {
  const Index c = static_cast<Index>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const Index u = blockIdx.x;
  float* row = dwte + static_cast<Index>(tokens[u]) * C;
  float acc = row[c];
  for (std::int32_t j = offsets[u]; j < offsets[u + 1]; ++j) {
    acc += dout[static_cast<Index>(positions[j]) * C + c];
  }
  row[c] = acc;
}

#undef CHIMERA_GRID_STRIDE

}  // namespace

void launch_accumulate(cudaStream_t stream, float* dst, const float* src, Index n) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

void launch_broadcast_bias(cudaStream_t stream, float* out, const float* residual,
                           const float* bias, Index N, Index C) {
  if (N * C == 0) return;
  broadcast_bias_kernel<<<grid_for(N * C), kThreads, 0, stream>>>(out, residual, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

void launch_gelu_forward(cudaStream_t stream, float* out, const float* inp, Index n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                          Index n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, inp, dout, n);
  CUDA_CHECK_LAUNCH();
}

void launch_adamw(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  Index n, const AdamWArgs& args) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(params, grads, m, v, n, args);
  CUDA_CHECK_LAUNCH();
}

void launch_embedding_forward(cudaStream_t stream, float* out, const std::int32_t* tokens,
                              const float* wte, const float* wpe, Index B, Index T, Index C) {
  const Index n = B * T * C;
  if (n == 0) return;
  embedding_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, tokens, wte, wpe, T, C, n);
  CUDA_CHECK_LAUNCH();
}

void launch_position_embedding_backward(cudaStream_t stream, float* dwpe, const float* dout,
                                        Index B, Index T, Index C) {
  if (T * C == 0) return;
  position_embedding_backward_kernel<<<grid_for(T * C), kThreads, 0, stream>>>(dwpe, dout, B, T, C);
  CUDA_CHECK_LAUNCH();
}

void launch_token_embedding_backward(cudaStream_t stream, float* dwte, const float* dout,
                                     const std::int32_t* tokens, const std::int32_t* offsets,
                                     const std::int32_t* positions, Index rows, Index C) {
  if (rows == 0 || C == 0) return;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((C + kThreads - 1) / kThreads));
  token_embedding_backward_kernel<<<grid, kThreads, 0, stream>>>(dwte, dout, tokens, offsets,
                                                                 positions, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace chimera::backend::cuda
