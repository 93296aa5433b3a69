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
struct HeadActivations {
  float* ln_f;       // [N, C]
  float* ln_f_mean;  // [N]
  float* ln_f_rstd;  // [N]
  float* probs;      // [N, Vp] logits, then probabilities, then (backward) p - onehot
  float* losses;     // [N] per-token cross-entropy
};

// Per-token losses of ln_f(x) wte^T against targets (device int32 [N]).
void head_forward(Backend& be, const Dims& d, const HeadWeights& w, const float* x,
                  const std::int32_t* targets, const HeadActivations& a);
// dx for the loss sum times `token_scale` (the mean over N tokens times the runtime's loss
// scale); leaves dln_f [N, C] for the weight pass.
void head_backward_input(Backend& be, const Dims& d, const HeadWeights& w, const float* x,
                         const std::int32_t* targets, const HeadActivations& a, float token_scale,
                         float* dln_f, float* dx);
void head_backward_weight(Backend& be, const Dims& d, const HeadWeightGrads& dw, const float* x,
                          const HeadActivations& a, float token_scale, const float* dln_f);

}  // namespace chimera::model
