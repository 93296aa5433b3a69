// The layer and optimizer kernels of CudaBackend: argument plumbing to kernels_*.cu, plus the
// host-side preparation of the token-embedding backward.
#include <algorithm>
#include <climits>
#include <vector>

#include "chimera/core/error.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "kernels.hpp"

namespace chimera::backend::cuda {

void CudaBackend::accumulate(float* dst, const float* src, Index n) {
  launch_accumulate(stream_, dst, src, n);
}

void CudaBackend::broadcast_bias(float* out, const float* residual, const float* bias, Index N,
                                 Index C) {
  launch_broadcast_bias(stream_, out, residual, bias, N, C);
}

void CudaBackend::bias_backward(float* dbias, const float* dout, Index N, Index C) {
  auto* partials = static_cast<float*>(scratch(column_sum_scratch_floats(N, C) * sizeof(float)));
  launch_bias_backward(stream_, dbias, dout, N, C, partials);
}

void CudaBackend::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                    const float* wpe, Index B, Index T, Index C) {
  launch_embedding_forward(stream_, out, tokens, wte, wpe, B, T, C);
}

// Repeated tokens must add into one wte row in a fixed order without atomics. The B*T tokens come
// to the host (a few KB), which groups the positions of each distinct token in increasing order
// (a counting sort); one block per distinct token then adds its rows in that order, as the CPU
// backend does.
void CudaBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                     const std::int32_t* tokens, Index B, Index T, Index C) {
  launch_position_embedding_backward(stream_, dwpe, dout, B, T, C);
  const auto n = static_cast<std::size_t>(B * T);
  if (n == 0) return;
  CHIMERA_CHECK(n < INT32_MAX, "{} tokens in one embedding backward", n);
  std::vector<std::int32_t> host_tokens(n);
  copy_to_host(host_tokens.data(), tokens, n * sizeof(std::int32_t));
  const std::int32_t max_token = *std::max_element(host_tokens.begin(), host_tokens.end());
  CHIMERA_CHECK(*std::min_element(host_tokens.begin(), host_tokens.end()) >= 0,
                "negative token id in the embedding backward");
  // start[t] = first slot of token t's positions
  std::vector<std::int32_t> start(static_cast<std::size_t>(max_token) + 2, 0);
  for (const std::int32_t t : host_tokens) ++start[static_cast<std::size_t>(t) + 1];
  std::size_t distinct = 0;
  for (std::size_t t = 1; t < start.size(); ++t) {
    distinct += start[t] > 0 ? 1 : 0;
    start[t] += start[t - 1];
  }
  // One upload of [distinct tokens | offsets (distinct + 1) | positions (n)].
  const std::size_t ints = distinct + (distinct + 1) + n;
  auto* csr = static_cast<std::int32_t*>(pinned_scratch(ints * sizeof(std::int32_t)));
  std::int32_t* rows = csr;
  std::int32_t* offsets = csr + distinct;
  std::int32_t* positions = offsets + distinct + 1;
  std::size_t u = 0;
  for (std::size_t t = 0; t + 1 < start.size(); ++t) {
    if (start[t + 1] == start[t]) continue;
    rows[u] = static_cast<std::int32_t>(t);
    offsets[u++] = start[t];
  }
  offsets[distinct] = static_cast<std::int32_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    positions[start[static_cast<std::size_t>(host_tokens[i])]++] = static_cast<std::int32_t>(i);
  }
  auto* device_csr = static_cast<std::int32_t*>(scratch(ints * sizeof(std::int32_t)));
  // Asynchronous from page-locked memory: the next call's copy_to_host above waits for it before
  // the host buffer is written again.
  CUDA_CHECK(cudaMemcpyAsync(device_csr, csr, ints * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                             stream_));
  launch_token_embedding_backward(stream_, dwte, dout, device_csr, device_csr + distinct,
                                  device_csr + 2 * distinct + 1, static_cast<Index>(distinct), C);
}

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, Index N, Index C) {
  launch_layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, N, C);
}

void CudaBackend::layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                           const float* inp, const float* weight, const float* mean,
                                           const float* rstd, Index N, Index C) {
  launch_layernorm_backward_input(stream_, dinp, dresidual, dout, inp, weight, mean, rstd, N, C);
}

void CudaBackend::layernorm_backward_params(float* dweight, float* dbias, const float* dout,
                                            const float* inp, const float* mean, const float* rstd,
                                            Index N, Index C) {
  auto* partials = static_cast<float*>(scratch(column_sum_scratch_floats(N, C) * sizeof(float)));
  launch_layernorm_backward_params(stream_, dweight, dbias, dout, inp, mean, rstd, N, C, partials);
}

void CudaBackend::gelu_forward(float* out, const float* inp, Index n) {
  launch_gelu_forward(stream_, out, inp, n);
}

void CudaBackend::gelu_backward(float* dinp, const float* inp, const float* dout, Index n) {
  launch_gelu_backward(stream_, dinp, inp, dout, n);
}

void CudaBackend::softmax_cross_entropy_forward(float* logits, float* losses,
                                                const std::int32_t* targets, Index N, Index V,
                                                Index ld) {
  launch_softmax_cross_entropy_forward(stream_, logits, losses, targets, N, V, ld);
}

void CudaBackend::softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, Index N,
                                                 Index ld) {
  launch_softmax_cross_entropy_backward(stream_, probs, targets, N, ld);
}

void CudaBackend::adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                               const AdamWArgs& args) {
  launch_adamw(stream_, params, grads, m, v, n, args);
}

double CudaBackend::sum_of_squares(const float* x, Index n) {
  // [result | per-block partial sums]
  auto* sums =
      static_cast<double*>(scratch((1 + sum_of_squares_scratch_doubles()) * sizeof(double)));
  launch_sum_of_squares(stream_, sums, x, n, sums + 1);
  double result = 0.0;
  copy_to_host(&result, sums, sizeof result);
  return result;
}

}  // namespace chimera::backend::cuda
