#include "chimera/model/gpt2_config.hpp"

#include "chimera/core/error.hpp"

namespace chimera::model {

GPT2Config GPT2Config::from(const ModelConfig& model) {
  const auto require_positive = [](int value, const char* key) {
    CHIMERA_REQUIRE(value >= 1, "model.{} = {} must be at least 1", key, value);
  };
  require_positive(model.n_layer, "n_layer");
  require_positive(model.n_embd, "n_embd");
  require_positive(model.n_head, "n_head");
  require_positive(model.n_ctx, "n_ctx");
  require_positive(model.vocab_size, "vocab_size");
  CHIMERA_REQUIRE(model.vocab_size <= (1 << 30),
                  "model.vocab_size = {} is too large (at most 2^30)", model.vocab_size);
  if (model.n_embd % model.n_head != 0) {
    const int below = model.n_embd / model.n_head * model.n_head;
    const int above = below + model.n_head;
    throw InputError(fmt::format(
        "model.n_embd = {} is not divisible by model.n_head = {}: every head needs the same "
        "width, so n_embd must be a multiple of n_head (e.g. n_embd = {}{})",
        model.n_embd, model.n_head, above, below > 0 ? fmt::format(" or {}", below) : ""));
  }
  GPT2Config c;
  c.n_layer = model.n_layer;
  c.n_embd = model.n_embd;
  c.n_head = model.n_head;
  c.n_ctx = model.n_ctx;
  c.vocab_size = model.vocab_size;
  c.padded_vocab_size = (model.vocab_size + kVocabPadding - 1) / kVocabPadding * kVocabPadding;
  return c;
}

void GPT2Config::require_seq_len(int seq_len) const {
  CHIMERA_REQUIRE(seq_len >= 1, "data.seq_len = {} must be at least 1", seq_len);
  CHIMERA_REQUIRE(seq_len <= n_ctx,
                  "data.seq_len = {} exceeds model.n_ctx = {}: the model has position embeddings "
                  "for {} tokens only (lower data.seq_len or raise model.n_ctx)",
                  seq_len, n_ctx, n_ctx);
}

}  // namespace chimera::model
