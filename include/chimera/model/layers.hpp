#pragma once
// The composite layers of GPT-2 as plain forward/backward functions over contiguous buffers
// (llm.c's style); LayerNorm, GELU, embedding and the softmax + cross-entropy come straight from
// the backend. Backward passes are split into an input-gradient part and a weight-gradient part
// (zero-bubble schedules run them at different times); weight gradients accumulate (+=).
#include "chimera/backend/backend.hpp"

namespace chimera::model {

using backend::Backend;
using backend::Index;

// Sizes of one micro-batch: B sequences of T tokens, width C, H heads, vocabulary V padded to Vp.
struct Dims {
  Index B = 0;
  Index T = 0;
  Index C = 0;
  Index H = 0;
  Index V = 0;
  Index Vp = 0;
  Index N() const { return B * T; }
  Index head_size() const { return C / H; }
};

// Hugging Face Conv1D: out[N, n_out] = inp[N, n_in] weight[n_in, n_out] + bias (+ residual, if
// not null).
void linear_forward(Backend& be, float* out, const float* inp, const float* weight,
                    const float* bias, const float* residual, Index N, Index n_in, Index n_out);
// dinp = dout weight^T
void linear_backward_input(Backend& be, float* dinp, const float* dout, const float* weight,
                           Index N, Index n_in, Index n_out);
// dweight += inp^T dout;  dbias += column sums of dout
void linear_backward_weight(Backend& be, float* dweight, float* dbias, const float* dout,
                            const float* inp, Index N, Index n_in, Index n_out);

// Causal multi-head self-attention on qkv [B, T, 3C] (q | k | v, heads contiguous within each):
// att [B, H, T, T] = softmax(q k^T / sqrt(C/H)) with the causal mask; out [B, T, C] = att v.
void attention_forward(Backend& be, const Dims& d, float* out, float* att, const float* qkv);
// dqkv [B, T, 3C] from dout [B, T, C]; `datt` is scratch of B*H*T*T floats.
void attention_backward(Backend& be, const Dims& d, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att);

}  // namespace chimera::model
