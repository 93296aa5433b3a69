#pragma once
// The linear layer of GPT-2 (HF Conv1D) as plain forward/backward functions over contiguous
// buffers (llm.c's style); attention, LayerNorm, GELU, embedding and the softmax + cross-entropy
// come straight from the backend's fused kernels. Backward passes are split into an input-gradient
// part and a weight-gradient part (zero-bubble schedules run them at different times); weight
// gradients accumulate (+=).
#include "chimera/backend/backend.hpp"
#include "chimera/model/gpt2_config.hpp"

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

  // B samples of T tokens through `config`'s model: the one place a stage's sizes are made.
  static Dims of(const GPT2Config& config, Index B, Index T) {
    return Dims{B, T, config.n_embd, config.n_head, config.vocab_size, config.padded_vocab_size};
  }
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

}  // namespace chimera::model
