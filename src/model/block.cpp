#include "chimera/model/block.hpp"

namespace chimera::model {

using backend::Trans;

void block_forward(Backend& be, const Dims& d, const BlockWeights& w, const float* x,
                   const BlockActivations& a) {
  const Index N = d.N(), C = d.C;
  be.layernorm_forward(a.ln_1, a.ln_1_mean, a.ln_1_rstd, x, w.ln_1_weight, w.ln_1_bias, N, C);
  linear_forward(be, a.qkv, a.ln_1, w.attn_c_attn_weight, w.attn_c_attn_bias, nullptr, N, C, 3 * C);
  be.attention_forward(a.atty, a.att, a.qkv, d.B, d.T, C, d.H);
  linear_forward(be, a.x2, a.atty, w.attn_c_proj_weight, w.attn_c_proj_bias, x, N, C, C);
  be.layernorm_forward(a.ln_2, a.ln_2_mean, a.ln_2_rstd, a.x2, w.ln_2_weight, w.ln_2_bias, N, C);
  linear_forward(be, a.fc, a.ln_2, w.mlp_c_fc_weight, w.mlp_c_fc_bias, nullptr, N, C, 4 * C);
  be.gelu_forward(a.fc_gelu, a.fc, N * 4 * C);
  linear_forward(be, a.out, a.fc_gelu, w.mlp_c_proj_weight, w.mlp_c_proj_bias, a.x2, N, 4 * C, C);
}

void block_backward_input(Backend& be, const Dims& d, const BlockWeights& w, const float* x,
                          const BlockActivations& a, const float* dy, float* dx,
                          const BlockSavedGrads& g, const BackwardScratch& scratch) {
  const Index N = d.N(), C = d.C;
  // MLP: dy -> dfc -> dln_2; the residual adds dy to the LayerNorm's input gradient.
  linear_backward_input(be, g.dfc, dy, w.mlp_c_proj_weight, N, 4 * C, C);
  be.gelu_backward(g.dfc, a.fc, g.dfc, N * 4 * C);
  linear_backward_input(be, g.dln_2, g.dfc, w.mlp_c_fc_weight, N, C, 4 * C);
  be.layernorm_backward_input(g.dx2, dy, g.dln_2, a.x2, w.ln_2_weight, a.ln_2_mean, a.ln_2_rstd, N,
                              C);
  // Attention: dx2 -> datty -> dqkv -> dln_1; the residual adds dx2.
  linear_backward_input(be, scratch.datty, g.dx2, w.attn_c_proj_weight, N, C, C);
  be.attention_backward(g.dqkv, scratch.datt, scratch.datty, a.qkv, a.att, d.B, d.T, C, d.H);
  linear_backward_input(be, g.dln_1, g.dqkv, w.attn_c_attn_weight, N, C, 3 * C);
  be.layernorm_backward_input(dx, g.dx2, g.dln_1, x, w.ln_1_weight, a.ln_1_mean, a.ln_1_rstd, N, C);
}

void block_backward_weight(Backend& be, const Dims& d, const BlockWeightGrads& dw, const float* x,
                           const BlockActivations& a, const float* dy, const BlockSavedGrads& g) {
  const Index N = d.N(), C = d.C;
  linear_backward_weight(be, dw.mlp_c_proj_weight, dw.mlp_c_proj_bias, dy, a.fc_gelu, N, 4 * C, C);
  linear_backward_weight(be, dw.mlp_c_fc_weight, dw.mlp_c_fc_bias, g.dfc, a.ln_2, N, C, 4 * C);
  be.layernorm_backward_params(dw.ln_2_weight, dw.ln_2_bias, g.dln_2, a.x2, a.ln_2_mean,
                               a.ln_2_rstd, N, C);
  linear_backward_weight(be, dw.attn_c_proj_weight, dw.attn_c_proj_bias, g.dx2, a.atty, N, C, C);
  linear_backward_weight(be, dw.attn_c_attn_weight, dw.attn_c_attn_bias, g.dqkv, a.ln_1, N, C,
                         3 * C);
  be.layernorm_backward_params(dw.ln_1_weight, dw.ln_1_bias, g.dln_1, x, a.ln_1_mean, a.ln_1_rstd,
                               N, C);
}

void head_forward(Backend& be, const Dims& d, const HeadWeights& w, const float* x,
                  const std::int32_t* targets, const HeadScratch& s, float grad_scale,
                  const HeadWeightGrads& dw, float* dx) {
  const Index N = d.N(), C = d.C;
  be.layernorm_forward(s.ln_f, s.ln_f_mean, s.ln_f_rstd, x, w.ln_f_weight, w.ln_f_bias, N, C);
  // Logits chunk by chunk (row stride Vp; the padded columns are never computed), each turned
  // into its loss and, when training, at once into dln_f and wte's gradient.
  be.lm_head_cross_entropy(s.losses, s.dln_f, dw.wte, s.ln_f, w.wte, targets, N, C, d.V, grad_scale,
                           s.logits, d.Vp, s.chunk_rows);
  if (grad_scale == 0.0F) return;
  be.layernorm_backward_input(dx, nullptr, s.dln_f, x, w.ln_f_weight, s.ln_f_mean, s.ln_f_rstd, N,
                              C);
  be.layernorm_backward_params(dw.ln_f_weight, dw.ln_f_bias, s.dln_f, x, s.ln_f_mean, s.ln_f_rstd,
                               N, C);
}

void head_logits(Backend& be, const Dims& d, const HeadWeights& w, const float* x, Index rows,
                 float* ln_f, float* mean, float* rstd, float* logits) {
  be.layernorm_forward(ln_f, mean, rstd, x, w.ln_f_weight, w.ln_f_bias, rows, d.C);
  be.gemm(Trans::No, Trans::Yes, rows, d.V, d.C, 1.0F, ln_f, d.C, w.wte, d.C, 0.0F, logits, d.V);
}

}  // namespace chimera::model
