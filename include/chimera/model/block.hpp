#pragma once
// One pre-LayerNorm transformer block and the final LayerNorm + tied LM head + cross-entropy,
// each as forward / backward-input / backward-weight functions over the buffers below.
#include <cstdint>

#include "chimera/model/layers.hpp"
#include "chimera/model/parameters.hpp"

namespace chimera::model {

// What a block's forward stores for its backward (sizes per micro-batch, N = B*T tokens).
struct BlockActivations {
  float* ln_1;       // [N, C]  LayerNorm 1 output
  float* ln_1_mean;  // [N]
  float* ln_1_rstd;  // [N]
  float* qkv;        // [N, 3C]
  float* att;        // [B, H, T, T] attention probabilities
  float* atty;       // [N, C]  attention output before its projection
  float* x2;         // [N, C]  residual stream after attention
  float* ln_2;       // [N, C]
  float* ln_2_mean;  // [N]
  float* ln_2_rstd;  // [N]
  float* fc;         // [N, 4C] MLP pre-activation
  float* fc_gelu;    // [N, 4C]
  float* out;        // [N, C]  block output (residual stream)
};

// Gradients the input pass computes and the weight pass consumes.
struct BlockSavedGrads {
  float* dfc;    // [N, 4C] gradient of the MLP pre-activation
  float* dln_2;  // [N, C]
  float* dx2;    // [N, C]  gradient of the residual stream after attention
  float* dqkv;   // [N, 3C]
  float* dln_1;  // [N, C]
};

// Scratch of the input pass, reused by every block.
struct BackwardScratch {
  float* datty;  // [N, C]
  float* datt;   // [B, H, T, T]
};

// out = x + attn(ln_1(x)) + mlp(ln_2(x + attn(ln_1(x))))  (x: [N, C] block input)
void block_forward(Backend& be, const Dims& d, const BlockWeights& w, const float* x,
                   const BlockActivations& a);
// dx from dy (gradients of the block output and input); fills g for the weight pass.
void block_backward_input(Backend& be, const Dims& d, const BlockWeights& w, const float* x,
                          const BlockActivations& a, const float* dy, float* dx,
                          const BlockSavedGrads& g, const BackwardScratch& scratch);
// Accumulates the block's parameter gradients into dw.
void block_backward_weight(Backend& be, const Dims& d, const BlockWeightGrads& dw, const float* x,
                           const BlockActivations& a, const float* dy, const BlockSavedGrads& g);

struct HeadWeights {
  const float* wte;  // [Vp, C] (rows V.. are padding)
  const float* ln_f_weight;
  const float* ln_f_bias;
};
struct HeadWeightGrads {
  float* wte;
  float* ln_f_weight;
  float* ln_f_bias;
};
// Per-worker scratch of the head (nothing in it outlives a call): the logits exist one chunk of
// rows at a time, never for all N rows.
struct HeadScratch {
  float* ln_f;       // [N, C]
  float* ln_f_mean;  // [N]
  float* ln_f_rstd;  // [N]
  float* dln_f;      // [N, C]
  float* losses;     // [N] per-token cross-entropy
  float* logits;     // [chunk_rows, Vp]
  Index chunk_rows;
};

// Final LayerNorm, tied LM head and cross-entropy of x [N, C] (the last block's output) against
// targets (device int32 [N]): the per-token losses go to s.losses. With grad_scale != 0 (the mean
// over N tokens times the runtime's loss scale) the same pass computes the gradient of
// grad_scale * (sum of the losses): dx [N, C] for x, and the head's parameter gradients added
// into dw. The loss is the last op of the model, so nothing later is needed for that.
void head_forward(Backend& be, const Dims& d, const HeadWeights& w, const float* x,
                  const std::int32_t* targets, const HeadScratch& s, float grad_scale,
                  const HeadWeightGrads& dw, float* dx);
// Logits [rows, V] (row stride V) of `rows` rows of x [rows, C], for sampling; ln_f [rows, C],
// mean and rstd [rows] are scratch.
void head_logits(Backend& be, const Dims& d, const HeadWeights& w, const float* x, Index rows,
                 float* ln_f, float* mean, float* rstd, float* logits);

}  // namespace chimera::model
