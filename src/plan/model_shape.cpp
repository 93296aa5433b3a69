#include "chimera/plan/model_shape.hpp"

#include "chimera/model/activations.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/model/partition.hpp"

namespace chimera::plan {

namespace {

model::StageShape shape_of(const StageInfo& s) {
  return {s.blocks, s.first, s.last};
}

}  // namespace

ModelShape::ModelShape(const ModelConfig& model, int seq_len)
    : config_(model::GPT2Config::from(model)), seq_len_(seq_len) {
  config_.require_seq_len(seq_len);
}

std::vector<StageInfo> ModelShape::stages(int num_stages) const {
  const model::StagePartition partition = model::balanced_partition(config_, num_stages, seq_len_);
  const model::ParameterLayout layout(config_, partition);
  std::vector<StageInfo> out;
  for (int s = 0; s < num_stages; ++s) {
    out.push_back({partition.num_blocks(s), partition.is_first(s), partition.is_last(s),
                   static_cast<double>(layout.stage_floats(s))});
  }
  return out;
}

double ModelShape::tied_params() const {
  return static_cast<double>(config_.padded_vocab_size) * config_.n_embd;
}

double ModelShape::total_params() const {
  double total = tied_params();
  for (const StageInfo& s : stages(1)) total += s.params;
  return total;
}

double ModelShape::activation_bytes(const StageInfo& stage, int samples, bool recompute) const {
  return static_cast<double>(
      model::activation_bytes_formula(dims(samples), shape_of(stage), recompute));
}

double ModelShape::saved_grad_bytes(const StageInfo& stage, int samples) const {
  return static_cast<double>(model::SavedGradLayout(dims(samples), shape_of(stage)).bytes());
}

double ModelShape::workspace_bytes(int samples) const {
  return static_cast<double>(model::workspace_bytes(dims(samples)));
}

double ModelShape::head_scratch_bytes(int samples) const {
  return static_cast<double>(model::head_scratch_bytes(dims(samples)));
}

double ModelShape::message_bytes(int samples) const {
  return 4.0 * samples * seq_len_ * config_.n_embd;
}

model::Dims ModelShape::dims(int samples) const {
  return {samples,        seq_len_,           config_.n_embd,
          config_.n_head, config_.vocab_size, config_.padded_vocab_size};
}

}  // namespace chimera::plan
