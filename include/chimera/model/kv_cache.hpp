#pragma once
// Generation with a key/value cache: each block keeps the q|k|v rows of every position it has
// seen, so a new token runs one position through the model instead of the whole window. A
// prompt (or a window that has to move) runs as one forward of all its positions (prefill), which
// fills the cache; every later token attends over the cached keys and values.
//
// Positions are absolute within the window (GPT-2's learned position embeddings), so a sequence
// longer than the window keeps its last `capacity` tokens and rebuilds the cache from them: the
// same logits as running the whole window again (the no-cache path), at its cost.
#include <cstdint>
#include <span>

#include "chimera/backend/buffer.hpp"
#include "chimera/model/worker.hpp"

namespace chimera::model {

// In a pipeline each stage keeps the cache of its own blocks: stage 0 embeds the tokens, every
// other stage reads the activations [P, C] (a prefill) or [C] (one position) of the stage
// before, every stage but the last writes its blocks' output for the next, and the last stage
// writes the logits of the newest position.
class CachedDecoder {
 public:
  // Reads the weights of `stage`, which `worker` must hold (they are never changed here); room
  // for `capacity` positions (1..n_ctx). Without `stage`: the whole model, which the worker must
  // hold as one stage.
  CachedDecoder(GPT2Worker& worker, int capacity);
  CachedDecoder(GPT2Worker& worker, int capacity, int stage);

  int capacity() const { return capacity_; }
  int positions() const { return positions_; }
  bool first() const { return stage_ == 0; }
  bool last() const { return last_; }

  // The whole model: forgets the cache and runs `tokens` (1..capacity of them) from position 0;
  // writes the logits [V] of the last token.
  void prefill(std::span<const std::int32_t> tokens, std::span<float> logits);
  // Runs one more token at the next position (positions() < capacity()); writes its logits [V].
  void append(std::int32_t token, std::span<float> logits);

  // This stage's part of prefill(): `P` positions from `tokens` (stage 0) or `in` [P, C] (backend
  // memory), into `out` [P, C] (not the last stage) or `logits` (the last).
  void prefill_stage(std::span<const std::int32_t> tokens, const float* in, Index P, float* out,
                     std::span<float> logits);
  // This stage's part of append(): `token` (stage 0) or `in` [C], into `out` [C] or `logits`.
  void append_stage(std::int32_t token, const float* in, float* out, std::span<float> logits);

 private:
  float* layer_cache(int layer) const;  // [capacity, 3C]: q | k | v rows by position
  const float* params() const;
  HeadWeights head_weights() const;
  void read_logits(const float* x, std::span<float> logits);

  GPT2Worker& worker_;
  backend::Backend& be_;
  Dims d_;
  int stage_;
  bool last_;
  int first_block_;
  int layers_;
  int capacity_;
  int positions_ = 0;
  backend::DeviceBuffer cache_;    // layers x capacity x 3C
  backend::DeviceBuffer prefill_;  // one block's activations for `capacity` positions, and x
  backend::DeviceBuffer step_;     // one position's activations, scores and logits
  backend::DeviceBuffer token_;    // int32 ids of a prefill
};

}  // namespace chimera::model
