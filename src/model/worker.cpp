#include "chimera/model/worker.hpp"

#include <algorithm>
#include <vector>

#include "activation_pool.hpp"
#include "chimera/core/error.hpp"
#include "chimera/model/init.hpp"

namespace chimera::model {

struct GPT2Worker::HeldStage {
  int stage;
  int first_block;
  StageShape shape;
  backend::DeviceBuffer params;
  backend::DeviceBuffer grads;
  ActivationLayout acts;
  SavedGradLayout saved;
};

namespace {

std::byte* bytes_of(const backend::DeviceBuffer& buffer) {
  return static_cast<std::byte*>(buffer.data());
}

// The one backward walk over a stage's blocks, from the last to the first: each with its input
// (the block before's output, or the stage's input) and its activations; `after_block` after each.
template <typename Visit>
void walk_blocks_backward(const ActivationLayout& acts_layout, std::byte* acts, int blocks,
                          const std::function<void()>& after_block, Visit visit) {
  for (int l = blocks - 1; l >= 0; --l) {
    const float* x = l > 0 ? acts_layout.block(acts, l - 1).out : acts_layout.input(acts);
    visit(l, x, acts_layout.block(acts, l));
    if (after_block) after_block();
  }
}

// Which gradient buffers a stage's backward takes: the last stage starts from its loss (no
// grad_output), stage 0 ends at the embedding (no grad_input).
void check_backward_io(const StageShape& shape, int stage, const float* grad_output,
                       const float* grad_input) {
  CHIMERA_CHECK(shape.last == (grad_output == nullptr),
                "stage {}: the last stage takes no grad_output, the others need one", stage);
  CHIMERA_CHECK(!shape.first || grad_input == nullptr, "stage 0 writes no grad_input");
  CHIMERA_CHECK(shape.first || grad_input != nullptr, "stage {} needs a grad_input", stage);
}

}  // namespace

GPT2Worker::GPT2Worker(backend::Backend& backend, const GPT2Config& config,
                       const StagePartition& partition, std::vector<int> stages,
                       const Options& options)
    : be_(backend),
      layout_(config, partition),
      recompute_(options.recompute),
      stage_ids_(std::move(stages)),
      pool_(std::make_unique<ActivationPool>(backend)) {
  // The run's settings were checked at setup (config_checks.hpp, RunPlan): these are contracts.
  CHIMERA_CHECK(options.micro_batch_size >= 1,
                "a stage micro-batch of {} samples: must be at least 1", options.micro_batch_size);
  config.require_seq_len(options.seq_len);
  dims_ = Dims::of(config, options.micro_batch_size, options.seq_len);

  const int S = partition.num_stages();
  CHIMERA_CHECK(!stage_ids_.empty(), "a worker must hold at least one stage");
  std::vector<int> sorted = stage_ids_;
  std::sort(sorted.begin(), sorted.end());
  CHIMERA_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
                "stage listed twice for one worker");
  for (const int s : stage_ids_) {
    CHIMERA_CHECK(s >= 0 && s < S, "stage {} outside the {} model stages", s, S);
    const StageShape shape{partition.num_blocks(s), partition.is_first(s), partition.is_last(s)};
    held_.push_back(std::make_unique<HeldStage>(
        HeldStage{s, partition.first_block(s), shape,
                  backend::DeviceBuffer::zeros(be_, layout_.stage_floats(s)),
                  backend::DeviceBuffer::zeros(be_, layout_.stage_floats(s)),
                  ActivationLayout(dims_, shape), SavedGradLayout(dims_, shape)}));
  }
  const bool first = holds(0);
  const bool last = holds(S - 1);
  if (first || last) {
    tied_params_ = backend::DeviceBuffer::zeros(be_, layout_.tied_floats());
    tied_grads_ = backend::DeviceBuffer::zeros(be_, layout_.tied_floats());
  }
  if (first && last) {
    embedding_grads_ = backend::DeviceBuffer::zeros(be_, layout_.tied_floats());
    embedding_row_listed_.assign(static_cast<std::size_t>(dims_.Vp), false);
  }
  // Weights change only through backend calls (write_tensor's copies, AdamW), so the backend may
  // keep its GEMM operand copies of them (bf16) between changes.
  for (const auto& h : held_)
    be_.register_weights(h->params.f32(), static_cast<Index>(h->params.floats()));
  if (!tied_params_.empty())
    be_.register_weights(tied_params_.f32(), static_cast<Index>(tied_params_.floats()));
}

GPT2Worker::~GPT2Worker() = default;

std::vector<int> GPT2Worker::tied_stages(int num_stages) {
  if (num_stages == 1) return {0};
  return {0, num_stages - 1};
}

bool GPT2Worker::holds(int stage) const {
  return std::find(stage_ids_.begin(), stage_ids_.end(), stage) != stage_ids_.end();
}

GPT2Worker::HeldStage& GPT2Worker::held(int stage) {
  const auto it = std::find_if(held_.begin(), held_.end(),
                               [stage](const auto& h) { return h->stage == stage; });
  CHIMERA_CHECK(it != held_.end(), "model stage {} is not held by this worker", stage);
  return **it;
}

// --- parameters ------------------------------------------------------------------------------

BufferView GPT2Worker::params(int stage) {
  HeldStage& h = held(stage);
  return {h.params.f32(), h.params.floats()};
}

BufferView GPT2Worker::grads(int stage) {
  HeldStage& h = held(stage);
  return {h.grads.f32(), h.grads.floats()};
}

BufferView GPT2Worker::tied_params() {
  return {tied_params_.f32(), tied_params_.floats()};
}

BufferView GPT2Worker::tied_grads() {
  return {tied_grads_.f32(), tied_grads_.floats()};
}

void GPT2Worker::zero_grad() {
  for (auto& h : held_) be_.fill_zero(h->grads.data(), h->grads.bytes());
  if (!tied_grads_.empty()) be_.fill_zero(tied_grads_.data(), tied_grads_.bytes());
  // The embedding's part is zero unless a backward wrote it since the last finalize (which clears
  // it): a Vp x C reset saved per step.
  if (embedding_grads_pending_) {
    be_.fill_zero(embedding_grads_.data(), embedding_grads_.bytes());
    forget_embedding_rows();
  }
  embedding_grads_pending_ = false;
}

void GPT2Worker::forget_embedding_rows() {
  for (const std::int32_t r : embedding_rows_)
    embedding_row_listed_[static_cast<std::size_t>(r)] = false;
  embedding_rows_.clear();
}

void GPT2Worker::finalize_tied_grads() {
  if (!embedding_grads_pending_) return;
  be_.move_rows(tied_grads_.f32(), embedding_grads_.f32(), dims_.Vp, dims_.C,
                embedding_rows_.data(), static_cast<Index>(embedding_rows_.size()));
  forget_embedding_rows();
  embedding_grads_pending_ = false;
}

float* GPT2Worker::embedding_grad_target(const Slot& s) {
  if (embedding_grads_.empty()) return tied_grads_.f32();
  embedding_grads_pending_ = true;
  for (const std::int32_t r : s.tokens) {
    if (embedding_row_listed_[static_cast<std::size_t>(r)]) continue;
    embedding_row_listed_[static_cast<std::size_t>(r)] = true;
    embedding_rows_.push_back(r);
  }
  return embedding_grads_.f32();
}

std::vector<const TensorInfo*> GPT2Worker::tensors() const {
  std::vector<const TensorInfo*> out;
  if (holds_tied()) out.push_back(&layout_.tied());
  for (const auto& h : held_) {
    for (const TensorInfo& t : layout_.stage_tensors(h->stage)) out.push_back(&t);
  }
  return out;
}

float* GPT2Worker::params_of(const TensorInfo& t) {
  return t.stage == kTiedStage ? tied_params().data : params(t.stage).data;
}

float* GPT2Worker::grads_of(const TensorInfo& t) {
  return t.stage == kTiedStage ? tied_grads().data : grads(t.stage).data;
}

// The internal layout is the Hugging Face layout (wte's padding rows come after its V rows), so
// a tensor is t.numel contiguous floats at t.offset.
void GPT2Worker::read_tensor(const TensorInfo& t, const float* buffer,
                             std::span<float> host_hf) const {
  CHIMERA_CHECK(host_hf.size() == t.numel, "{} has {} elements, host buffer {}", t.name, t.numel,
                host_hf.size());
  be_.copy_to_host(host_hf.data(), buffer + t.offset, t.numel * sizeof(float));
}

void GPT2Worker::write_tensor(const TensorInfo& t, float* buffer, std::span<const float> host_hf) {
  CHIMERA_CHECK(host_hf.size() == t.numel, "{} has {} elements, host buffer {}", t.name, t.numel,
                host_hf.size());
  be_.copy_from_host(buffer + t.offset, host_hf.data(), t.numel * sizeof(float));
}

void GPT2Worker::init_parameters(std::uint64_t seed) {
  std::vector<float> host;
  for (const TensorInfo* t : tensors()) {
    host.resize(t->numel);
    initial_values(*t, seed, host);
    write_tensor(*t, params_of(*t), host);
  }
}

// --- compute ---------------------------------------------------------------------------------

HeadWeights GPT2Worker::head_weights(HeldStage& h) {
  const float* p = h.params.f32();
  return {tied_params_.f32(), p + layout_.ln_f_weight_offset(), p + layout_.ln_f_bias_offset()};
}

HeadWeightGrads GPT2Worker::head_weight_grads(HeldStage& h) {
  float* g = h.grads.f32();
  return {tied_grads_.f32(), g + layout_.ln_f_weight_offset(), g + layout_.ln_f_bias_offset()};
}

void GPT2Worker::check_ids(std::span<const std::int32_t> ids, const char* what, int mb) const {
  CHIMERA_CHECK(static_cast<Index>(ids.size()) == dims_.N(),
                "micro-batch {} has {} {}s, expected B*T = {}", mb, ids.size(), what, dims_.N());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHIMERA_REQUIRE(ids[i] >= 0 && ids[i] < dims_.V,
                    "{} {} at position {} of micro-batch {} is outside the vocabulary [0, {}) "
                    "(model.vocab_size = {} must cover the dataset's tokens)",
                    what, ids[i], i, mb, dims_.V, dims_.V);
  }
}

void GPT2Worker::run_blocks(HeldStage& h, std::byte* acts) {
  const float* x = h.acts.input(acts);
  for (int l = 0; l < h.shape.num_blocks; ++l) {
    const BlockActivations a = h.acts.block(acts, l);
    block_forward(be_, dims_, layout_.block<const float>(h.params.f32(), h.first_block + l), x, a);
    x = a.out;
    if (after_block_) after_block_();
  }
}

float GPT2Worker::forward(int stage, int mb, const ForwardInput& input, float* output) {
  HeldStage& h = held(stage);
  CHIMERA_CHECK(!slots_.contains({stage, mb}),
                "forward of stage {} micro-batch {} again before its backward", stage, mb);
  // Every check before the first allocation, so that a rejected call holds no memory.
  if (h.shape.first) check_ids(input.tokens, "token", mb);
  if (!h.shape.first) {
    CHIMERA_CHECK(input.activation != nullptr, "stage {} needs an input activation", stage);
  }
  if (h.shape.last) check_ids(input.targets, "target", mb);
  if (!h.shape.last) CHIMERA_CHECK(output != nullptr, "stage {} needs an output buffer", stage);

  const Index N = dims_.N(), C = dims_.C;
  backend::DeviceBuffer acts = pool_->acquire(h.acts.full_bytes());
  std::byte* base = bytes_of(acts);
  if (h.shape.first) {
    be_.copy_from_host(h.acts.tokens(base), input.tokens.data(), input.tokens.size_bytes());
    be_.embedding_forward(h.acts.input(base), h.acts.tokens(base), tied_params_.f32(),
                          h.params.f32() + layout_.wpe_offset(), dims_.B, dims_.T, C);
  } else {
    be_.copy(h.acts.input(base), input.activation, message_floats() * sizeof(float));
  }
  if (h.shape.last) {
    be_.copy_from_host(h.acts.targets(base), input.targets.data(), input.targets.size_bytes());
  }
  run_blocks(h, base);

  float loss = 0.0F;
  if (h.shape.last) {
    // The loss is the model's last op: its gradient (and the head's weight gradients) come now,
    // chunk by chunk, and the backward starts from head_grad.
    if (head_scratch_.empty())
      head_scratch_ = backend::DeviceBuffer(be_, model::head_scratch_bytes(dims_));
    const HeadScratch scratch = head_scratch_at(bytes_of(head_scratch_), dims_);
    head_forward(be_, dims_, head_weights(h), h.acts.output(base), h.acts.targets(base), scratch,
                 input.loss_scale / static_cast<float>(N), head_weight_grads(h),
                 h.acts.head_grad(base));
    std::vector<float> losses(static_cast<std::size_t>(N));
    be_.copy_to_host(losses.data(), scratch.losses, losses.size() * sizeof(float));
    double sum = 0.0;
    for (const float l : losses) sum += l;
    loss = static_cast<float>(sum / static_cast<double>(N));
  } else {
    be_.copy(output, h.acts.output(base), message_floats() * sizeof(float));
  }

  Slot s;
  s.loss_grad = h.shape.last && input.loss_scale != 0.0F;
  if (h.shape.first && !embedding_grads_.empty())
    s.tokens.assign(input.tokens.begin(), input.tokens.end());
  if (recompute_) {
    s.acts = pool_->acquire(h.acts.kept_bytes());
    be_.copy(s.acts.data(), base, h.acts.kept_bytes());
    pool_->release(std::move(acts));
  } else {
    s.acts = std::move(acts);
    s.full = true;
  }
  slots_.emplace(std::make_pair(stage, mb), std::move(s));
  return loss;
}

GPT2Worker::Slot& GPT2Worker::slot(int stage, int mb) {
  const auto it = slots_.find({stage, mb});
  CHIMERA_CHECK(it != slots_.end(), "stage {} micro-batch {} has no forward to go back through",
                stage, mb);
  return it->second;
}

void GPT2Worker::ensure_full_activations(HeldStage& h, Slot& s) {
  if (s.full) return;
  backend::DeviceBuffer acts = pool_->acquire(h.acts.full_bytes());
  be_.copy(acts.data(), s.acts.data(), h.acts.kept_bytes());
  pool_->release(std::move(s.acts));
  s.acts = std::move(acts);
  s.full = true;
  run_blocks(h, bytes_of(s.acts));
}

void GPT2Worker::check_loss_grad(const StageShape& shape, const Slot& s, int stage, int mb) {
  CHIMERA_CHECK(!shape.last || s.loss_grad,
                "stage {} micro-batch {}: a backward needs the loss gradient, but its forward "
                "ran without one (ForwardInput::loss_scale = 0)",
                stage, mb);
}

void GPT2Worker::ensure_workspace() {
  if (workspace_.empty()) workspace_ = backend::DeviceBuffer(be_, model::workspace_bytes(dims_));
}

void GPT2Worker::backward(int stage, int mb, const float* grad_output, float* grad_input) {
  HeldStage& h = held(stage);
  Slot& s = slot(stage, mb);
  CHIMERA_CHECK(!s.input_done, "stage {} micro-batch {}: backward after backward_input", stage, mb);
  check_backward_io(h.shape, stage, grad_output, grad_input);
  check_loss_grad(h.shape, s, stage, mb);
  ensure_full_activations(h, s);
  ensure_workspace();
  std::byte* acts = bytes_of(s.acts);
  const Workspace ws = workspace_at(bytes_of(workspace_), dims_);
  const int n = h.shape.num_blocks;

  // The same input and weight passes as backward_input + backward_weight, block by block, with
  // one block's saved gradients in the workspace instead of every block's in the slot. The last
  // stage starts from the gradient its forward left.
  const float* dy = h.shape.last ? h.acts.head_grad(acts) : grad_output;
  walk_blocks_backward(
      h.acts, acts, n, after_block_, [&](int l, const float* x, const BlockActivations& a) {
        float* other = dy == ws.grad_a ? ws.grad_b : ws.grad_a;
        float* dx = l > 0 || h.shape.first ? other : grad_input;
        block_backward_input(be_, dims_,
                             layout_.block<const float>(h.params.f32(), h.first_block + l), x, a,
                             dy, dx, ws.block, ws.scratch);
        block_backward_weight(be_, dims_, layout_.block<float>(h.grads.f32(), h.first_block + l), x,
                              a, dy, ws.block);
        dy = dx;
      });
  if (h.shape.first) {
    be_.embedding_backward(embedding_grad_target(s), h.grads.f32() + layout_.wpe_offset(), dy,
                           h.acts.tokens(acts), dims_.B, dims_.T, dims_.C);
  }
  release(stage, mb);
}

void GPT2Worker::backward_input(int stage, int mb, const float* grad_output, float* grad_input) {
  HeldStage& h = held(stage);
  Slot& s = slot(stage, mb);
  CHIMERA_CHECK(!s.input_done, "stage {} micro-batch {}: backward_input twice", stage, mb);
  check_backward_io(h.shape, stage, grad_output, grad_input);
  check_loss_grad(h.shape, s, stage, mb);
  ensure_full_activations(h, s);
  ensure_workspace();
  s.saved = pool_->acquire(h.saved.bytes());
  std::byte* acts = bytes_of(s.acts);
  std::byte* saved = bytes_of(s.saved);
  const Workspace ws = workspace_at(bytes_of(workspace_), dims_);
  const int n = h.shape.num_blocks;
  s.input_done = true;

  be_.copy(h.saved.dy(saved, n - 1), h.shape.last ? h.acts.head_grad(acts) : grad_output,
           message_floats() * sizeof(float));
  walk_blocks_backward(
      h.acts, acts, n, after_block_, [&](int l, const float* x, const BlockActivations& a) {
        float* dx = l > 0 ? h.saved.dy(saved, l - 1)
                          : (h.shape.first ? h.saved.dembedding(saved) : grad_input);
        block_backward_input(be_, dims_,
                             layout_.block<const float>(h.params.f32(), h.first_block + l), x, a,
                             h.saved.dy(saved, l), dx, h.saved.block(saved, l), ws.scratch);
      });
}

void GPT2Worker::backward_weight(int stage, int mb) {
  HeldStage& h = held(stage);
  Slot& s = slot(stage, mb);
  CHIMERA_CHECK(s.input_done, "stage {} micro-batch {}: backward_weight before backward_input",
                stage, mb);
  std::byte* acts = bytes_of(s.acts);
  std::byte* saved = bytes_of(s.saved);
  const int n = h.shape.num_blocks;
  walk_blocks_backward(
      h.acts, acts, n, after_block_, [&](int l, const float* x, const BlockActivations& a) {
        block_backward_weight(be_, dims_, layout_.block<float>(h.grads.f32(), h.first_block + l), x,
                              a, h.saved.dy(saved, l), h.saved.block(saved, l));
      });
  if (h.shape.first) {
    be_.embedding_backward(embedding_grad_target(s), h.grads.f32() + layout_.wpe_offset(),
                           h.saved.dembedding(saved), h.acts.tokens(acts), dims_.B, dims_.T,
                           dims_.C);
  }
  release(stage, mb);
}

void GPT2Worker::release(int stage, int mb) {
  Slot& s = slot(stage, mb);
  pool_->release(std::move(s.acts));
  pool_->release(std::move(s.saved));
  slots_.erase({stage, mb});
}

void GPT2Worker::logits(int mb, std::span<float> host_out, Index first_row) {
  const int last = layout_.partition().num_stages() - 1;
  HeldStage& h = held(last);
  Slot& s = slot(last, mb);
  CHIMERA_CHECK(s.full && !s.input_done,
                "logits of micro-batch {} need its stored activations (no recompute) before its "
                "backward",
                mb);
  const auto rows = static_cast<Index>(host_out.size()) / dims_.V;
  CHIMERA_CHECK(rows * dims_.V == static_cast<Index>(host_out.size()) && first_row >= 0 &&
                    first_row + rows <= dims_.N(),
                "logits of rows [{}, {}) of a micro-batch of {} rows of {} floats", first_row,
                first_row + rows, dims_.N(), dims_.V);
  // The slot keeps no logits: the final LayerNorm and the head run again on the rows asked for.
  backend::DeviceBuffer out(be_, host_out.size_bytes());
  backend::DeviceBuffer ln_f(be_, static_cast<std::size_t>(rows * (dims_.C + 2)) * sizeof(float));
  float* ln = ln_f.f32();
  head_logits(be_, dims_, head_weights(h), h.acts.output(bytes_of(s.acts)) + first_row * dims_.C,
              rows, ln, ln + rows * dims_.C, ln + rows * (dims_.C + 1), out.f32());
  be_.copy_to_host(host_out.data(), out.data(), host_out.size_bytes());
}

std::size_t GPT2Worker::activation_bytes() const {
  return pool_->in_use();
}

std::size_t GPT2Worker::peak_activation_bytes() const {
  return pool_->peak();
}

void GPT2Worker::reset_peak_activation_bytes() {
  pool_->reset_peak();
}

}  // namespace chimera::model
