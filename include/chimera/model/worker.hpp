#pragma once
// The part of GPT-2 that one worker holds: any set of model stages (Chimera: {p, D-1-p}; 2f
// pipes: 2f stages; interleaved: v stages; D = 1: {0}), with their parameters and gradients, and
// per (stage, micro-batch) activation slots between each forward and its backward.
//
// Memory: every tensor of a stage except wte lives in one contiguous parameter buffer (and its
// gradient in another) so that one allreduce covers a stage. The tied token table wte lives in
// its own buffer pair, shared by stage 0 (embedding) and stage S-1 (LM head) when the worker
// holds both. Host vs device: tokens, targets and host_* spans are host memory; every float* is
// backend (device) memory.
//
// Tied-embedding gradient: ranks holding stage 0 or S-1 sum tied_grads() over the "tied group".
// A worker that holds both accumulates the embedding's part apart from the head's and adds it in
// finalize_tied_grads(), so that the sum has the same order as the head + embedding sum of two
// workers: a D = 1 run reproduces D > 1 bit for bit. Call finalize_tied_grads() after the
// worker's last backward of the iteration and before reading or reducing tied_grads().
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "chimera/backend/buffer.hpp"
#include "chimera/model/activations.hpp"
#include "chimera/model/parameters.hpp"

namespace chimera::model {

class ActivationPool;

struct BufferView {
  float* data = nullptr;
  std::size_t count = 0;  // floats
};

struct ForwardInput {
  std::span<const std::int32_t> tokens;   // stage 0: B*T token ids (host)
  const float* activation = nullptr;      // stages > 0: the previous stage's output [B*T*C]
  std::span<const std::int32_t> targets;  // stage S-1: B*T next-token ids (host)
  // Stage S-1 in training: the forward also computes the gradient of loss_scale times the mean
  // loss (the runtime passes 1/(W·M)), and with it the head's parameter gradients (+=); a
  // backward of the micro-batch then needs no logits. 0: the loss only (evaluation, sampling),
  // and the micro-batch can have no backward.
  float loss_scale = 0;
};

class GPT2Worker {
 public:
  struct Options {
    int micro_batch_size = 1;  // B
    int seq_len = 1;           // T (<= n_ctx)
    bool recompute = false;    // keep only stage inputs; recompute the forward in the backward
  };

  GPT2Worker(backend::Backend& backend, const GPT2Config& config, const StagePartition& partition,
             std::vector<int> stages, const Options& options);
  ~GPT2Worker();
  GPT2Worker(const GPT2Worker&) = delete;
  GPT2Worker& operator=(const GPT2Worker&) = delete;

  // --- structure -------------------------------------------------------------------------
  const GPT2Config& config() const { return layout_.config(); }
  backend::Backend& backend() const { return be_; }
  const ParameterLayout& layout() const { return layout_; }
  const std::vector<int>& stages() const { return stage_ids_; }
  bool holds(int stage) const;
  bool holds_tied() const { return !tied_params_.empty(); }
  const Dims& dims() const { return dims_; }
  // Floats of one activation message between stages (and of its gradient): B*T*C.
  std::size_t message_floats() const { return static_cast<std::size_t>(dims_.N() * dims_.C); }
  // The stages whose ranks sum the tied gradient: {0, S-1} (one stage when S = 1).
  static std::vector<int> tied_stages(int num_stages);

  // --- parameters and gradients ------------------------------------------------------------
  BufferView params(int stage);
  BufferView grads(int stage);
  BufferView tied_params();  // wte, padded_vocab x C floats; empty if not held
  BufferView tied_grads();
  void zero_grad();
  void finalize_tied_grads();
  bool tied_grads_pending() const { return embedding_grads_pending_; }

  // Every tensor this worker holds (wte first if held, then by stage).
  std::vector<const TensorInfo*> tensors() const;
  // Start of the parameter / gradient buffer that holds t.
  float* params_of(const TensorInfo& t);
  float* grads_of(const TensorInfo& t);
  // Copies tensor t between a buffer with the layout of t's buffer (its parameters, gradients or
  // an AdamW moment of the same size) and host memory in Hugging Face layout (t.numel floats).
  void read_tensor(const TensorInfo& t, const float* buffer, std::span<float> host_hf) const;
  void write_tensor(const TensorInfo& t, float* buffer, std::span<const float> host_hf);
  // Deterministic initialisation (init.hpp), independent of the partition.
  void init_parameters(std::uint64_t seed);

  // --- compute ---------------------------------------------------------------------------
  // Forward of `stage` for micro-batch `mb`; non-last stages write `output` [B*T*C]. Returns the
  // mean cross-entropy over the B*T tokens on the last stage, 0 elsewhere. On the last stage, with
  // input.loss_scale != 0, it also accumulates the head's parameter gradients (+=).
  float forward(int stage, int mb, const ForwardInput& input, float* output);
  // Accumulates parameter gradients (+=). The last stage takes no grad_output (it starts from the
  // loss gradient its forward computed); stage 0 writes no grad_input (pass null).
  void backward(int stage, int mb, const float* grad_output, float* grad_input);
  // The same gradients in two steps (zero-bubble schedules): the input gradient now, the weight
  // gradients later. Activations are freed after backward_weight.
  void backward_input(int stage, int mb, const float* grad_output, float* grad_input);
  void backward_weight(int stage, int mb);
  // Called after each transformer block of a forward, backward or recompute (null: nothing).
  // The runtime progresses its messages there: MPI moves a large message over TCP only inside
  // MPI calls, so a stage computing for a whole op would hold its neighbours' messages.
  void set_after_block(std::function<void()> hook) { after_block_ = std::move(hook); }
  // Frees a micro-batch's activations without a backward (evaluation).
  void release(int stage, int mb);
  // Logits (host) of rows [first_row, first_row + host_out.size() / V) of the B*T rows of a
  // last-stage micro-batch, after its forward and before its backward (needs stored
  // activations: not with recompute).
  void logits(int mb, std::span<float> host_out, Index first_row = 0);

  // --- memory ----------------------------------------------------------------------------
  std::size_t activation_bytes() const;  // held now by activation slots
  std::size_t peak_activation_bytes() const;
  void reset_peak_activation_bytes();
  std::size_t workspace_bytes() const { return workspace_.bytes() + head_scratch_.bytes(); }

 private:
  struct HeldStage;
  struct Slot {
    backend::DeviceBuffer acts;  // every activation, or only the kept prefix (recompute)
    bool full = false;
    backend::DeviceBuffer saved;  // split backward: from backward_input to backward_weight
    bool input_done = false;
    bool loss_grad = false;  // last stage: the forward computed the loss gradient
    // The micro-batch's tokens on the host, kept where the embedding's gradient goes to a table
    // of its own (embedding_grads_): they name the rows its backward writes there.
    std::vector<std::int32_t> tokens;
  };

  HeldStage& held(int stage);
  Slot& slot(int stage, int mb);
  void run_blocks(HeldStage& h, std::byte* acts);
  void ensure_full_activations(HeldStage& h, Slot& s);
  void ensure_workspace();
  static void check_loss_grad(const StageShape& shape, const Slot& s, int stage, int mb);
  // Where the embedding backward of slot s adds its wte gradient; records the rows it touches.
  float* embedding_grad_target(const Slot& s);
  // Empties embedding_rows_ (after the rows it lists were zeroed).
  void forget_embedding_rows();
  HeadWeights head_weights(HeldStage& h);
  HeadWeightGrads head_weight_grads(HeldStage& h);
  void check_ids(std::span<const std::int32_t> ids, const char* what, int mb) const;

  backend::Backend& be_;
  ParameterLayout layout_;
  Dims dims_;
  bool recompute_;
  std::vector<int> stage_ids_;
  std::vector<std::unique_ptr<HeldStage>> held_;
  backend::DeviceBuffer tied_params_, tied_grads_;
  // only when holding stage 0 and stage S-1; all zeros whenever embedding_grads_pending_ is false,
  // and zero outside the rows listed in embedding_rows_ (a step's tokens touch few of Vp rows,
  // so finalize_tied_grads moves only those)
  backend::DeviceBuffer embedding_grads_;
  bool embedding_grads_pending_ = false;
  std::vector<std::int32_t> embedding_rows_;
  std::vector<bool> embedding_row_listed_;
  std::unique_ptr<ActivationPool> pool_;
  std::map<std::pair<int, int>, Slot> slots_;
  backend::DeviceBuffer workspace_;
  backend::DeviceBuffer head_scratch_;  // the head's chunk of logits and its other scratch
  std::function<void()> after_block_;
};

}  // namespace chimera::model
