#include "chimera/model/layers.hpp"

#include <cmath>

namespace chimera::model {

using backend::Trans;

void linear_forward(Backend& be, float* out, const float* inp, const float* weight,
                    const float* bias, const float* residual, Index N, Index n_in, Index n_out) {
  be.broadcast_bias(out, residual, bias, N, n_out);
  be.gemm(Trans::No, Trans::No, N, n_out, n_in, 1.0F, inp, n_in, weight, n_out, 1.0F, out, n_out);
}

void linear_backward_input(Backend& be, float* dinp, const float* dout, const float* weight,
                           Index N, Index n_in, Index n_out) {
  be.gemm(Trans::No, Trans::Yes, N, n_in, n_out, 1.0F, dout, n_out, weight, n_out, 0.0F, dinp,
          n_in);
}

void linear_backward_weight(Backend& be, float* dweight, float* dbias, const float* dout,
                            const float* inp, Index N, Index n_in, Index n_out) {
  be.gemm(Trans::Yes, Trans::No, n_in, n_out, N, 1.0F, inp, n_in, dout, n_out, 1.0F, dweight,
          n_out);
  be.bias_backward(dbias, dout, N, n_out);
}

// Head h of sequence b: q, k, v are T x hs with row stride 3C at columns h*hs, C + h*hs and
// 2C + h*hs of qkv; its T x T scores are matrix b*H + h of att; its output is columns h*hs.. of
// out (row stride C). One strided-batched GEMM per sequence covers its H heads.
void attention_forward(Backend& be, const Dims& d, float* out, float* att, const float* qkv) {
  const Index T = d.T, C = d.C, H = d.H, hs = d.head_size();
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
  for (Index b = 0; b < d.B; ++b) {
    const float* q = qkv + b * T * 3 * C;
    be.gemm_strided_batched(Trans::No, Trans::Yes, T, T, hs, scale, q, 3 * C, hs, q + C, 3 * C, hs,
                            0.0F, att + b * H * T * T, T, T * T, H);
  }
  be.causal_softmax_forward(att, T, d.B * H);
  for (Index b = 0; b < d.B; ++b) {
    const float* v = qkv + b * T * 3 * C + 2 * C;
    be.gemm_strided_batched(Trans::No, Trans::No, T, hs, T, 1.0F, att + b * H * T * T, T, T * T, v,
                            3 * C, hs, 0.0F, out + b * T * C, C, hs, H);
  }
}

void attention_backward(Backend& be, const Dims& d, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att) {
  const Index T = d.T, C = d.C, H = d.H, hs = d.head_size();
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
  for (Index b = 0; b < d.B; ++b) {
    const float* dy = dout + b * T * C;
    const float* v = qkv + b * T * 3 * C + 2 * C;
    const float* p = att + b * H * T * T;
    float* dp = datt + b * H * T * T;
    // datt = dy v^T;  dv = att^T dy
    be.gemm_strided_batched(Trans::No, Trans::Yes, T, T, hs, 1.0F, dy, C, hs, v, 3 * C, hs, 0.0F,
                            dp, T, T * T, H);
    be.gemm_strided_batched(Trans::Yes, Trans::No, T, hs, T, 1.0F, p, T, T * T, dy, C, hs, 0.0F,
                            dqkv + b * T * 3 * C + 2 * C, 3 * C, hs, H);
  }
  be.causal_softmax_backward(datt, att, datt, T, d.B * H);
  for (Index b = 0; b < d.B; ++b) {
    const float* q = qkv + b * T * 3 * C;
    const float* ds = datt + b * H * T * T;
    float* dq = dqkv + b * T * 3 * C;
    // dq = scale ds k;  dk = scale ds^T q
    be.gemm_strided_batched(Trans::No, Trans::No, T, hs, T, scale, ds, T, T * T, q + C, 3 * C, hs,
                            0.0F, dq, 3 * C, hs, H);
    be.gemm_strided_batched(Trans::Yes, Trans::No, T, hs, T, scale, ds, T, T * T, q, 3 * C, hs,
                            0.0F, dq + C, 3 * C, hs, H);
  }
}

}  // namespace chimera::model
