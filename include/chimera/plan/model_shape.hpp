#pragma once
// What the performance model needs to know about GPT-2, taken from the model module so that the
// planner counts exactly what the runtime allocates: the stage partition the runtime uses, the
// parameters of each stage, and the closed-form activation, saved-gradient and workspace bytes
// (docs/model.md).
#include <vector>

#include "chimera/core/config.hpp"
#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/layers.hpp"

namespace chimera::plan {

// One model stage of a partition.
struct StageInfo {
  int blocks = 0;
  bool first = false;   // holds the embeddings
  bool last = false;    // holds the final LayerNorm and the LM head
  double params = 0.0;  // floats of the stage buffer (the tied token table is separate)
};

class ModelShape {
 public:
  // The [model] section and data.seq_len of a run config; InputError on an invalid model.
  ModelShape(const ModelConfig& model, int seq_len);

  const model::GPT2Config& config() const { return config_; }
  int seq_len() const { return seq_len_; }
  int num_blocks() const { return config_.n_layer; }

  // The runtime's balanced partition into S model stages (InputError when S > blocks).
  std::vector<StageInfo> stages(int num_stages) const;
  double tied_params() const;  // the token table wte, padded rows included
  double total_params() const;

  // Bytes held per (stage, micro-batch of `samples`) from its forward to its backward.
  double activation_bytes(const StageInfo& stage, int samples, bool recompute) const;
  // Bytes held from backward_input to backward_weight (split backward).
  double saved_grad_bytes(const StageInfo& stage, int samples) const;
  // Per-worker scratch of the backward.
  double workspace_bytes(int samples) const;
  // The head's scratch (one chunk of logits, ln_f and its gradient) on a worker holding the last
  // stage.
  double head_scratch_bytes(int samples) const;
  // One activation (or activation gradient) message between stages.
  double message_bytes(int samples) const;

 private:
  model::Dims dims(int samples) const;

  model::GPT2Config config_;
  int seq_len_;
};

}  // namespace chimera::plan
