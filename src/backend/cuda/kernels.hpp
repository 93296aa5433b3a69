#pragma once
// Launchers of the CUDA kernels (kernels_*.cu), callable from host C++. Every launcher enqueues
// on `stream` and returns at once; arguments follow the Backend interface (backend.hpp), pointers
// are device memory. Every kernel is deterministic: no atomics, reductions in a fixed order that
// depends only on the sizes.
#include <cuda_runtime.h>

#include <cstdint>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cuda {

// --- kernels_elementwise.cu ---------------------------------------------------------------
void launch_accumulate(cudaStream_t stream, float* dst, const float* src, Index n);
void launch_broadcast_bias(cudaStream_t stream, float* out, const float* residual,
                           const float* bias, Index N, Index C);
void launch_gelu_forward(cudaStream_t stream, float* out, const float* inp, Index n);
void launch_gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                          Index n);
void launch_adamw(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  Index n, const AdamWArgs& args);
void launch_embedding_forward(cudaStream_t stream, float* out, const std::int32_t* tokens,
                              const float* wte, const float* wpe, Index B, Index T, Index C);
// dwpe[t, :] += sum_b dout[b, t, :], b in increasing order.
void launch_position_embedding_backward(cudaStream_t stream, float* dwpe, const float* dout,
                                        Index B, Index T, Index C);
// For each of `rows` distinct tokens u: dwte[tokens[u], :] += dout[p, :] for the positions p in
// positions[offsets[u] .. offsets[u + 1]), added one after another in that order.
void launch_token_embedding_backward(cudaStream_t stream, float* dwte, const float* dout,
                                     const std::int32_t* tokens, const std::int32_t* offsets,
                                     const std::int32_t* positions, Index rows, Index C);

// --- kernels_rows.cu: one row per warp or block ----------------------------------------------
void launch_layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, Index N,
                              Index C);
void launch_layernorm_backward_input(cudaStream_t stream, float* dinp, const float* dresidual,
                                     const float* dout, const float* inp, const float* weight,
                                     const float* mean, const float* rstd, Index N, Index C);
// `rows` rows of T probabilities; row r is position t = r % T of its sequence (causal mask).
void launch_causal_softmax_forward(cudaStream_t stream, float* att, Index rows, Index T);
// In place on datt: datt = att * (datt - sum(att * datt)) below the diagonal, 0 above.
void launch_causal_softmax_backward(cudaStream_t stream, float* datt, const float* att, Index rows,
                                    Index T);
void launch_softmax_cross_entropy_forward(cudaStream_t stream, float* logits, float* losses,
                                          const std::int32_t* targets, Index N, Index V, Index ld);
void launch_softmax_cross_entropy_backward(cudaStream_t stream, float* probs,
                                           const std::int32_t* targets, Index N, Index ld);

// --- kernels_reduce.cu: column sums and the sum of squares, in two fixed-order passes ------
// Floats of scratch the column reductions below need for N x C inputs.
std::size_t column_sum_scratch_floats(Index N, Index C);
// dbias += column sums of dout [N, C].
void launch_bias_backward(cudaStream_t stream, float* dbias, const float* dout, Index N, Index C,
                          float* scratch);
// dweight += sum_r dout * normalized(inp);  dbias += sum_r dout
void launch_layernorm_backward_params(cudaStream_t stream, float* dweight, float* dbias,
                                      const float* dout, const float* inp, const float* mean,
                                      const float* rstd, Index N, Index C, float* scratch);
// Doubles of scratch sum_of_squares needs (independent of n).
std::size_t sum_of_squares_scratch_doubles();
// *result (device) = sum x[i]^2 in double.
void launch_sum_of_squares(cudaStream_t stream, double* result, const float* x, Index n,
                           double* scratch);

}  // namespace chimera::backend::cuda
