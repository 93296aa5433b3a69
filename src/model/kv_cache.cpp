#include "chimera/model/kv_cache.hpp"

#include <cmath>

#include "chimera/core/error.hpp"

namespace chimera::model {

using backend::Trans;

namespace {

// Floats of one block's activations for P positions (block.hpp), without qkv (which lives in the
// cache) and the output (x): ln_1, atty, x2, ln_2 (4 P C), fc and its GELU (8 P C), 4 P means and
// rstds, and the attention probabilities H P^2.
Index prefill_block_floats(const Dims& d, Index P) {
  return 12 * P * d.C + 4 * P + d.H * P * P;
}

// One position's scratch: x, ln_1, atty, x2, ln_2 (5 C), fc and GELU (8 C), the final LayerNorm
// (C), 6 means and rstds (padded to 16), the scores of every head over the cache, the logits.
Index step_floats(const Dims& d, Index capacity) {
  return 14 * d.C + 16 + d.H * capacity + d.V;
}

}  // namespace

CachedDecoder::CachedDecoder(GPT2Worker& worker, int capacity)
    : CachedDecoder(worker, capacity, 0) {
  CHIMERA_CHECK(last_, "a cached decoder of the whole model needs one worker holding all of it");
}

CachedDecoder::CachedDecoder(GPT2Worker& worker, int capacity, int stage)
    : worker_(worker),
      be_(worker.backend()),
      d_(worker.dims()),
      stage_(stage),
      last_(stage == worker.layout().partition().num_stages() - 1),
      first_block_(worker.layout().partition().first_block(stage)),
      layers_(worker.layout().partition().num_blocks(stage)),
      capacity_(capacity) {
  CHIMERA_CHECK(worker.holds(stage), "a cached decoder of stage {} on a worker without it", stage);
  CHIMERA_CHECK(capacity >= 1 && capacity <= worker.config().n_ctx,
                "cache of {} positions, the model's n_ctx is {}", capacity, worker.config().n_ctx);
  const Index cap = capacity;
  cache_ = backend::DeviceBuffer(
      be_, static_cast<std::size_t>(layers_) * static_cast<std::size_t>(cap * 3 * d_.C) * 4);
  prefill_ = backend::DeviceBuffer(
      be_, static_cast<std::size_t>(2 * cap * d_.C + prefill_block_floats(d_, cap)) * 4);
  step_ = backend::DeviceBuffer(be_, static_cast<std::size_t>(step_floats(d_, cap)) * 4);
  token_ = backend::DeviceBuffer(be_, static_cast<std::size_t>(cap) * sizeof(std::int32_t));
}

void CachedDecoder::prefill(std::span<const std::int32_t> tokens, std::span<float> logits) {
  prefill_stage(tokens, nullptr, static_cast<Index>(tokens.size()), nullptr, logits);
}

void CachedDecoder::append(std::int32_t token, std::span<float> logits) {
  append_stage(token, nullptr, nullptr, logits);
}

const float* CachedDecoder::params() const {
  return worker_.params(stage_).data;
}

float* CachedDecoder::layer_cache(int layer) const {
  return cache_.f32() + static_cast<Index>(layer) * capacity_ * 3 * d_.C;
}

HeadWeights CachedDecoder::head_weights() const {
  const float* p = params();
  return {worker_.tied_params().data, p + worker_.layout().ln_f_weight_offset(),
          p + worker_.layout().ln_f_bias_offset()};
}

// Logits of the position whose last-block output is x [C].
void CachedDecoder::read_logits(const float* x, std::span<float> logits) {
  CHIMERA_CHECK(static_cast<Index>(logits.size()) == d_.V, "logits of {} floats, V = {}",
                logits.size(), d_.V);
  float* s = step_.f32();
  float* ln_f = s + 13 * d_.C;
  float* stats = s + 14 * d_.C;
  float* out = stats + 16 + d_.H * capacity_;
  head_logits(be_, d_, head_weights(), x, 1, ln_f, stats, stats + 1, out);
  be_.copy_to_host(logits.data(), out, logits.size_bytes());
}

void CachedDecoder::prefill_stage(std::span<const std::int32_t> tokens, const float* in, Index P,
                                  float* out, std::span<float> logits) {
  CHIMERA_CHECK(P >= 1 && P <= capacity_, "a prefill of {} tokens into a cache of {}", P,
                capacity_);
  const Dims d{1, P, d_.C, d_.H, d_.V, d_.Vp};
  const Index PC = P * d.C;
  float* x[2] = {prefill_.f32(), prefill_.f32() + capacity_ * d.C};
  float* r = prefill_.f32() + 2 * capacity_ * d.C;
  const float* params = this->params();
  if (first()) {
    CHIMERA_CHECK(static_cast<Index>(tokens.size()) == P,
                  "a prefill of {} positions from {} tokens", P, tokens.size());
    for (const std::int32_t t : tokens) {
      CHIMERA_REQUIRE(t >= 0 && t < d_.V, "token {} is outside the model's vocabulary [0, {})", t,
                      d_.V);
    }
    be_.copy_from_host(token_.data(), tokens.data(), tokens.size_bytes());
    be_.embedding_forward(x[0], static_cast<const std::int32_t*>(token_.data()),
                          worker_.tied_params().data, params + worker_.layout().wpe_offset(), 1, P,
                          d.C);
  } else {
    be_.copy(x[0], in, static_cast<std::size_t>(PC) * sizeof(float));
  }
  for (int l = 0; l < layers_; ++l) {
    // The block's q|k|v rows go straight into its cache; everything else is scratch.
    float* next = r;
    const auto take = [&next](Index floats) {
      float* at = next;
      next += floats;
      return at;
    };
    BlockActivations a{};
    a.ln_1 = take(PC);
    a.ln_1_mean = take(P);
    a.ln_1_rstd = take(P);
    a.qkv = layer_cache(l);
    a.att = take(d.H * P * P);
    a.atty = take(PC);
    a.x2 = take(PC);
    a.ln_2 = take(PC);
    a.ln_2_mean = take(P);
    a.ln_2_rstd = take(P);
    a.fc = take(4 * PC);
    a.fc_gelu = take(4 * PC);
    a.out = x[(l + 1) % 2];
    block_forward(be_, d, worker_.layout().block<const float>(params, first_block_ + l), x[l % 2],
                  a);
  }
  positions_ = static_cast<int>(P);
  if (last_) {
    read_logits(x[layers_ % 2] + (P - 1) * d.C, logits);
  } else {
    be_.copy(out, x[layers_ % 2], static_cast<std::size_t>(PC) * sizeof(float));
  }
}

void CachedDecoder::append_stage(std::int32_t token, const float* in, float* out,
                                 std::span<float> logits) {
  CHIMERA_CHECK(positions_ >= 1 && positions_ < capacity_,
                "append at position {} of a cache of {} (prefill first; rebuild when full)",
                positions_, capacity_);
  const Index C = d_.C, H = d_.H, hs = C / H, pos = positions_, L = pos + 1;
  float* s = step_.f32();
  float* x = s;
  float* ln_1 = s + C;
  float* atty = s + 2 * C;
  float* x2 = s + 3 * C;
  float* ln_2 = s + 4 * C;
  float* fc = s + 5 * C;
  float* fc_gelu = s + 9 * C;
  float* stats = s + 14 * C;
  float* scores = stats + 16;  // [H, L]
  const float* params = this->params();
  if (first()) {
    CHIMERA_REQUIRE(token >= 0 && token < d_.V,
                    "token {} is outside the model's vocabulary [0, {})", token, d_.V);
    be_.copy_from_host(token_.data(), &token, sizeof token);
    be_.embedding_forward(x, static_cast<const std::int32_t*>(token_.data()),
                          worker_.tied_params().data,
                          params + worker_.layout().wpe_offset() + pos * C, 1, 1, C);
  } else {
    be_.copy(x, in, static_cast<std::size_t>(C) * sizeof(float));
  }
  const float scale = 1.0F / std::sqrt(static_cast<float>(hs));
  for (int l = 0; l < layers_; ++l) {
    const BlockWeights w = worker_.layout().block<const float>(params, first_block_ + l);
    float* cache = layer_cache(l);
    float* qkv = cache + pos * 3 * C;  // this position's row of the cache
    be_.layernorm_forward(ln_1, stats, stats + 1, x, w.ln_1_weight, w.ln_1_bias, 1, C);
    linear_forward(be_, qkv, ln_1, w.attn_c_attn_weight, w.attn_c_attn_bias, nullptr, 1, C, 3 * C);
    // The new query against every cached key (all L are in its causal past), as the full
    // attention's row `pos`: scale on the alpha of q k^T, softmax, then the weighted values.
    for (Index h = 0; h < H; ++h) {
      be_.gemm(Trans::No, Trans::Yes, 1, L, hs, scale, qkv + h * hs, 3 * C, cache + C + h * hs,
               3 * C, 0.0F, scores + h * L, L);
    }
    be_.softmax_rows(scores, H, L, L);
    for (Index h = 0; h < H; ++h) {
      be_.gemm(Trans::No, Trans::No, 1, hs, L, 1.0F, scores + h * L, L, cache + 2 * C + h * hs,
               3 * C, 0.0F, atty + h * hs, C);
    }
    linear_forward(be_, x2, atty, w.attn_c_proj_weight, w.attn_c_proj_bias, x, 1, C, C);
    be_.layernorm_forward(ln_2, stats + 2, stats + 3, x2, w.ln_2_weight, w.ln_2_bias, 1, C);
    linear_forward(be_, fc, ln_2, w.mlp_c_fc_weight, w.mlp_c_fc_bias, nullptr, 1, C, 4 * C);
    be_.gelu_forward(fc_gelu, fc, 4 * C);
    linear_forward(be_, x, fc_gelu, w.mlp_c_proj_weight, w.mlp_c_proj_bias, x2, 1, 4 * C, C);
  }
  positions_ = static_cast<int>(L);
  if (last_) {
    read_logits(x, logits);
  } else {
    be_.copy(out, x, static_cast<std::size_t>(C) * sizeof(float));
  }
}

}  // namespace chimera::model
