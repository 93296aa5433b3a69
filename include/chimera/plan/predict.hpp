#pragma once
// The performance model (Li & Hoefler, SC'21, §3.6): an iteration costs the critical path of its
// forward and backward passes, replayed by the schedule simulator with every activation message
// taking alpha + beta * bytes, plus the gradient allreduce time the backward tail does not hide
// (Rabenseifner over the replicas of each stage, and over the holders of the tied token table),
// plus the optimizer step. Memory per worker counts weights, gradients, AdamW moments, the peak
// of activations held in the schedule's op order, and the backward's workspace.
// With the optimizer state sharded over each stage's holders (Layout::shard_optimizer, the
// runtime's parallel.shard_optimizer) a worker keeps 1/r of each held stage's moments and updates
// 1/r of its weights, r = the stage's holders x W (the tied table's: its holders x W); the sum is
// a reduce-scatter and each stage's all-gather, from the step boundary, may delay the stage's
// first forward (the simulator's pricing, simulate.hpp).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "chimera/plan/layer_costs.hpp"
#include "chimera/plan/model_shape.hpp"
#include "chimera/plan/network.hpp"
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::plan {

// The network's part of the simulator's costs: alpha, beta, the allreduce, the rendezvous size,
// ranks per host and their memory, the later-rank weight.
void apply_network(const Network& net, schedule::Costs& costs);

// One parallel configuration: W replicas of a pipeline group of D workers.
struct Layout {
  std::string scheme;      // gpipe | 1f1b | gems | interleaved | chimera | zb-h1
  std::string variant;     // chimera: direct | doubling | halving ("" = direct)
  int pipes = 0;           // chimera: 2f pipelines (0 = 2)
  int virtual_stages = 0;  // interleaved: model stages per worker (0 = 2)
  int W = 1;
  int D = 1;
  int N = 1;  // micro-batches per pipeline group and iteration
  int B = 1;  // samples per micro-batch
  bool recompute = false;
  bool shard_optimizer = false;  // AdamW moments sharded over each stage's holders

  int nodes() const { return W * D; }
  int global_batch() const { return W * N * B; }
  // "chimera", "chimera doubling", "chimera 4 pipes", "interleaved v=2", "1f1b"
  std::string scheme_label() const;
};

// Compute costs: a machine's per-layer costs, or the costs of the runtime's emulated compute
// (`chimera train --compute emulate --cost F:B`), which follow the simulator's convention: F and
// B per op on one configured micro-batch through 1/D of the model.
struct ComputeModel {
  std::optional<LayerCosts> layers;
  OpCost emulated;  // used without `layers`
  // Share of a backward that is the weight gradient (W) when it is split into I and W.
  double weight_share = 0.5;
  double optimizer_ns_per_param = 0.0;

  // Forward and backward of one model stage on `samples` samples (needs `layers`).
  OpCost stage_cost(const StageInfo& stage, int samples) const;
  // The emulated compute of runtime.cost "F:B[:W]" (milliseconds; W the weight-gradient part
  // of B, B/2 without it). InputError as schedule::Costs::parse gives it.
  static ComputeModel emulated_from(const std::string& cost);
};

struct Machine {
  Network network;
  double memory_bytes = 0.0;   // per device
  double reserve_bytes = 0.0;  // of it, not available to Chimera (runtime, libraries, slack)
  ComputeModel compute;
};

struct WorkerMemory {
  double weights = 0.0;
  double gradients = 0.0;
  double optimizer = 0.0;    // AdamW moments (this worker's shards of them when sharded)
  double activations = 0.0;  // peak held in the schedule's op order
  double workspace = 0.0;
  double total() const { return weights + gradients + optimizer + activations + workspace; }
};

struct Prediction {
  Layout layout;
  // = work + bubble + p2p + gather_exposed + allreduce_exposed + optimizer
  double iteration_ms = 0.0;
  double work_ms = 0.0;               // compute of the busiest worker
  double bubble_ms = 0.0;             // its idle time on the critical path (communication free)
  double p2p_ms = 0.0;                // what activation messages add to the critical path
  double gather_exposed_ms = 0.0;     // sharded: what waiting for weight gathers adds
  double allreduce_exposed_ms = 0.0;  // gradient sync after the last compute op
  double allreduce_ms = 0.0;          // all gradient allreduces (sharded: reduce-scatters)
  double gather_ms = 0.0;             // sharded: all weight all-gathers, hidden or not
  double allreduce_hidden_ms = 0.0;
  double optimizer_ms = 0.0;
  double bubble_ratio = 0.0;  // simulator's idle / (workers x makespan)
  double samples_per_s = 0.0;
  std::vector<WorkerMemory> memory;  // per worker
  double peak_memory_bytes = 0.0;    // the largest worker total
  bool fits = true;                  // peak_memory <= memory - reserve
};

// Predicts layouts for one model and machine; keeps the schedules and simulators it built, so
// that layouts differing only in B or recompute reuse them.
class Predictor {
 public:
  Predictor(ModelShape shape, Machine machine);
  ~Predictor();

  // InputError when the layout is not valid (no such schedule, more stages than blocks, ...).
  Prediction operator()(const Layout& layout);

  const ModelShape& shape() const { return shape_; }
  const Machine& machine() const { return machine_; }

 private:
  struct Built {
    schedule::Schedule schedule;
    schedule::Simulator simulator;
    std::unique_ptr<schedule::Simulator> sharded;  // its lowering with WaitGathers, once asked
  };
  const Built& build(const Layout& layout);
  const std::vector<StageInfo>& stages(int num_stages);

  ModelShape shape_;
  Machine machine_;
  std::map<std::tuple<std::string, std::string, int, int, int, int>, Built> built_;
  std::map<int, std::vector<StageInfo>> stages_;
};

}  // namespace chimera::plan
