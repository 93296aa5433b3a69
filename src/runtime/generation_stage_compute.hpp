#pragma once
// StageCompute for the text samples printed during pipelined training: each stage keeps the keys
// and values of its own blocks (model::CachedDecoder), so a new token passes one position's
// activation [C] from stage to stage instead of the whole window. Two passes share the caches:
// a prefill pass (messages of the window's [T, C]) fills them from a window of tokens, and an
// append pass (messages of [C]) runs one more token; both are forward-only schedules run by the
// same executor and transport as training.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "chimera/model/kv_cache.hpp"
#include "message_staging.hpp"
#include "stage_compute.hpp"

namespace chimera::runtime {

// The caches of the stages a worker holds, and what the next forwards run.
class GenerationCaches {
 public:
  explicit GenerationCaches(model::GPT2Worker& worker) : worker_(worker) {}

  // Empty caches of `capacity` positions for the next prompt; end() frees them.
  void begin(int capacity);
  void end() { decoders_.clear(); }
  model::CachedDecoder& decoder(int stage);

  // A prefill pass runs `window` from position 0; an append pass runs `token` next.
  std::span<const std::int32_t> window;
  std::int32_t token = 0;
  // On the last stage, after each forward, with the newest position's logits [V].
  std::function<void(std::span<const float> logits)> at_last;
  std::vector<float> logits;

 private:
  model::GPT2Worker& worker_;
  int capacity_ = 0;
  std::map<int, std::unique_ptr<model::CachedDecoder>> decoders_;
};

class GenerationStageCompute final : public StageCompute {
 public:
  enum class Kind { Prefill, Append };
  // Messages of `floats` floats (T*C for a prefill, C for an append), where `path` puts them.
  GenerationStageCompute(GenerationCaches& caches, Kind kind, backend::Backend& backend,
                         MessagePath path, std::size_t floats)
      : caches_(caches), kind_(kind), staging_(backend, path, floats) {}

  std::size_t message_floats() const override { return staging_.floats(); }
  float* allocate_message() override { return staging_.allocate(); }
  void deallocate_message(float* message) noexcept override { staging_.deallocate(message); }

  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out, float loss_scale) override;
  void backward(int stage, int, const float*, float*) override { no_backward(stage); }
  void backward_input(int stage, int, const float*, float*) override { no_backward(stage); }
  void backward_weight(int stage, int) override { no_backward(stage); }
  void zero_grad() override {}
  std::vector<GradBuffer> grad_buffers() override { return {}; }
  std::int64_t peak_activation_bytes() const override { return 0; }
  void reset_peak_activation_bytes() override {}

 private:
  [[noreturn]] static void no_backward(int stage);

  GenerationCaches& caches_;
  Kind kind_;
  MessageStaging staging_;
};

}  // namespace chimera::runtime
