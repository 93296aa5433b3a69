#include "chimera/model/layers.hpp"

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

}  // namespace chimera::model
