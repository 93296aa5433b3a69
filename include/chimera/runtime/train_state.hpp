#pragma once
// The trainable state of one worker: its GPT-2 stages' parameters (model::GPT2Worker), the AdamW
// moments laid out like them, the global-norm clip, and checkpoints. Checkpoints hold every
// tensor once, by Hugging Face name, whatever D and W: each tensor is written by its owner
// (replica 0, the lowest worker holding its stage) and read by every rank that holds it.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/communicators.hpp"
#include "chimera/comm/sharded_sum.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/optim/adamw.hpp"
#include "chimera/runtime/run_plan.hpp"

namespace chimera::runtime {

// Copies the weights of the tensors `worker` holds from a checkpoint already checked against its
// model (CheckpointReader::expect).
void read_weights(const io::CheckpointReader& reader, model::GPT2Worker& worker);

// Host copies of the tensors one rank writes to a checkpoint, in the writer's list (every tensor
// named, the data of the owned ones): the state a save writes while training goes on.
struct CheckpointSnapshot {
  std::vector<std::vector<float>> host;  // the owned tensors' values
  std::vector<io::TensorData> tensors;   // spans into `host`, which a move keeps valid
  // The spans are the live state (host memory, the CPU backend), not copies: they must be copied
  // before the state changes (an asynchronous save's helper thread does that).
  bool live = false;
};

class TrainState {
 public:
  TrainState(const RunPlan& plan, backend::Backend& backend, model::GPT2Worker& worker,
             const comm::Communicators& comms);

  // The sum of squares of the gradients this rank owns (each tensor of the model is owned by one
  // rank): the runtime sums it over ranks, together with the loss, for the global norm.
  double local_grad_squares();
  // Collective over the world, after a non-finite global norm: the model stages whose gradients
  // are not finite, ascending (model::kTiedStage first, for the tied embedding).
  std::vector<int> nonfinite_grad_stages() const;
  // One AdamW update of every held buffer; `step` counts from 0 (AdamW's t = step + 1).
  void optimizer_step(int step, double lr, double grad_scale);

  // Collective over replica 0's pipeline group (the other replicas return at once): writes a
  // checkpoint of the current state into `dir`. Returns the file's path ("" off replica 0).
  std::string save(const io::CheckpointDirectory& dir, const io::CheckpointMeta& meta);
  // The communicator checkpoints are written over (replica 0's pipeline group; MPI_COMM_NULL on
  // the other replicas), and this rank's part of a checkpoint of the current state (empty off
  // replica 0), into `out`, whose buffers are reused. `live_if_host`: where the state is host
  // memory, point at it instead of copying (CheckpointSnapshot::live).
  MPI_Comm save_comm() const;
  void snapshot(CheckpointSnapshot& out, bool live_if_host = false) const;
  // --resume: loads the weights and AdamW moments of the held tensors from a Chimera checkpoint
  // of this model (its metadata: read_meta_once). Collective over the world: each tensor is read
  // once per job, by its owner, and broadcast to its other holders (AgreedError on failure).
  void resume(const std::string& path);
  // --init: loads the held weights from a Chimera checkpoint or any file of GPT-2 tensors
  // (io::match_init_weights), read once per job as by resume(). Returns what was converted to
  // float32 ("" when nothing).
  std::string init(const std::string& path);
  // The stored bytes of tensor values the last resume() or init() read, summed over ranks.
  std::int64_t last_load_bytes() const { return last_load_bytes_; }

  // A held tensor (or AdamW moment, optim/exp_avg[_sq]/<name>) in Hugging Face layout; nullopt
  // when this worker holds no copy (with parallel.shard_optimizer, no moment is held whole).
  std::optional<std::vector<float>> host_tensor(const std::string& name) const;

  // parallel.shard_optimizer: this rank's shard of each held buffer (key: model stage, or
  // model::kTiedStage), over the buffer's communicator (the stage's, or the tied one).
  bool sharded() const { return !shards_.empty(); }
  const comm::ShardLayout& shard_layout(int key) const { return shards_.at(key).layout; }
  // The full weights of a held buffer, which the all-gather completes.
  float* weights(int key);

 private:
  std::vector<io::TensorSpec> specs(bool with_moments) const;
  // The full gradient of a held buffer, or with sharding its shard's sum (in place).
  const float* update_grads(int key);
  // Stores a moment tensor read from a checkpoint (Hugging Face layout): whole, or its part in
  // this rank's shard.
  void write_moment(const model::TensorInfo& t, float* moment, std::span<const float> host);

  const RunPlan& plan_;
  backend::Backend& backend_;
  model::GPT2Worker& worker_;
  const comm::Communicators& comms_;
  optim::AdamWConfig adamw_;
  // Buffer key: model stage, or model::kTiedStage.
  std::map<int, std::unique_ptr<optim::AdamWMoments>> moments_;
  std::map<int, std::vector<optim::ParamRange>> ranges_;
  std::map<int, double> local_squares_;  // the last local_grad_squares(), per buffer key
  struct Shard {
    comm::ShardLayout layout;  // the reduce-scatter leaves the sum in this part of the gradient
  };
  std::map<int, Shard> shards_;  // empty unless parallel.shard_optimizer
  std::int64_t last_load_bytes_ = 0;
};

}  // namespace chimera::runtime
