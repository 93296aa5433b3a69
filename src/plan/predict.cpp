#include "chimera/plan/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"

namespace chimera::plan {

namespace sched = chimera::schedule;

std::string Layout::scheme_label() const {
  std::string label = scheme;
  if (!variant.empty() && variant != "direct") label += " " + variant;
  if (pipes > 2) label += fmt::format(" {} pipes", pipes);
  if (scheme == "interleaved")
    label += fmt::format(" v={}", virtual_stages > 0 ? virtual_stages : 2);
  return label;
}

ComputeModel ComputeModel::emulated_from(const std::string& cost) {
  const sched::Costs parsed = sched::Costs::parse(cost);
  ComputeModel c;
  c.emulated = {parsed.F, parsed.B};
  c.weight_share = parsed.W / parsed.B;
  return c;
}

OpCost ComputeModel::stage_cost(const StageInfo& stage, int samples) const {
  CHIMERA_CHECK(layers.has_value(), "stage costs need per-layer costs");
  const LayerCosts& c = *layers;
  OpCost total{c.stage_overhead_ms, c.stage_overhead_ms};
  if (stage.first) total += c.scaled(c.embedding, samples);
  const OpCost block = c.scaled(c.block, samples);
  total += {block.forward_ms * stage.blocks, block.backward_ms * stage.blocks};
  if (stage.last) total += c.scaled(c.head, samples);
  return total;
}

Predictor::Predictor(ModelShape shape, Machine machine)
    : shape_(std::move(shape)), machine_(std::move(machine)) {
  if (const auto& layers = machine_.compute.layers) {
    const model::GPT2Config& m = shape_.config();
    CHIMERA_REQUIRE(layers->n_embd == m.n_embd && layers->n_head == m.n_head &&
                        layers->seq_len == shape_.seq_len() && layers->vocab_size == m.vocab_size,
                    "the costs are for n_embd {}, n_head {}, seq_len {}, vocab_size {} but the "
                    "model has n_embd {}, n_head {}, seq_len {}, vocab_size {}: measure costs for "
                    "this model (docs/scaling.md)",
                    layers->n_embd, layers->n_head, layers->seq_len, layers->vocab_size, m.n_embd,
                    m.n_head, shape_.seq_len(), m.vocab_size);
  }
}

Predictor::~Predictor() = default;

const std::vector<StageInfo>& Predictor::stages(int num_stages) {
  auto it = stages_.find(num_stages);
  if (it == stages_.end()) it = stages_.emplace(num_stages, shape_.stages(num_stages)).first;
  return it->second;
}

const Predictor::Built& Predictor::build(const Layout& l) {
  const auto key = std::make_tuple(l.scheme, l.variant, l.pipes, l.virtual_stages, l.D, l.N);
  auto it = built_.find(key);
  if (it == built_.end()) {
    sched::Schedule s =
        sched::make_schedule({l.scheme, l.D, l.N, l.variant, l.pipes, l.virtual_stages});
    sched::Simulator sim(s);
    it = built_.emplace(key, Built{std::move(s), std::move(sim), nullptr}).first;
  }
  if (l.shard_optimizer && !it->second.sharded) {
    it->second.sharded = std::make_unique<sched::Simulator>(
        it->second.schedule, sched::LowerOptions{.shard_optimizer = true});
  }
  return it->second;
}

namespace {

bool frees_activations(sched::OpKind k) {
  return k == sched::OpKind::B || k == sched::OpKind::W;
}

// Memory of every worker: the stages it holds, and the activations (and, with the split
// backward, saved gradients) held at once as its ops run in order. With sharded optimizer state
// the worker keeps one of r = holders x W shards of each held stage's moments.
std::vector<WorkerMemory> worker_memory(const sched::Schedule& s,
                                        const std::vector<StageInfo>& stages,
                                        const ModelShape& shape, int samples, bool recompute,
                                        int data_parallel, bool sharded) {
  std::vector<WorkerMemory> out(static_cast<std::size_t>(s.workers));
  const int last = s.stages - 1;
  std::vector<std::set<int>> held(static_cast<std::size_t>(s.workers));
  std::vector<int> holders(static_cast<std::size_t>(s.stages), 0);
  int tied_holders = 0;
  for (int w = 0; w < s.workers; ++w) {
    for (const sched::Op& op : s.ops[w]) held[w].insert(op.stage);
    for (const int st : held[w]) ++holders[st];
    tied_holders += held[w].count(0) || held[w].count(last) ? 1 : 0;
  }
  // The share of a stage's moments one holder keeps.
  auto share = [&](int replicas) { return sharded ? 1.0 / (replicas * data_parallel) : 1.0; };
  for (int w = 0; w < s.workers; ++w) {
    const bool tied = held[w].count(0) || held[w].count(last);
    double params = tied ? shape.tied_params() : 0.0;
    double moment_params = tied ? shape.tied_params() * share(tied_holders) : 0.0;
    double recompute_peak = 0.0;
    for (const int st : held[w]) {
      params += stages[st].params;
      moment_params += stages[st].params * share(holders[st]);
      recompute_peak = std::max(recompute_peak, shape.activation_bytes(stages[st], samples, false));
    }
    double live = 0.0;
    double peak = 0.0;
    for (const sched::Op& op : s.ops[w]) {
      const StageInfo& st = stages[op.stage];
      const double n = static_cast<double>(op.mbs.size());
      const double act = n * shape.activation_bytes(st, samples, recompute);
      const double saved = n * shape.saved_grad_bytes(st, samples);
      if (op.kind == sched::OpKind::F) live += act;
      if (op.kind == sched::OpKind::I) live += saved;
      peak = std::max(peak, live);
      if (frees_activations(op.kind)) live -= act;
      if (op.kind == sched::OpKind::W) live -= saved;
    }
    WorkerMemory& m = out[w];
    m.weights = 4.0 * params;
    m.gradients = 4.0 * params;
    m.optimizer = 8.0 * moment_params;
    // With recomputation one micro-batch's full activations exist again during its backward.
    m.activations = peak + (recompute ? recompute_peak : 0.0);
    m.workspace = shape.workspace_bytes(samples) +
                  (held[w].count(last) ? shape.head_scratch_bytes(samples) : 0.0);
  }
  return out;
}

// The simulator takes one F and one B for all ops, per configured micro-batch through 1/D of the
// model. Stages differ (the first holds the embedding, the last the LM head), so the planner gives
// it the mean op cost of the busiest worker: its total work is then exact. With one stage per
// worker (GPipe, 1F1B) that is the slowest stage; with Chimera and GEMS the mean of the worker's
// stages, e.g. the heavy last stage paired with the light first one.
OpCost busiest_worker_op_cost(const sched::Schedule& s, const std::vector<StageInfo>& stages,
                              const ComputeModel& compute, int samples) {
  std::vector<OpCost> stage_cost;
  for (const StageInfo& info : stages) stage_cost.push_back(compute.stage_cost(info, samples));
  // An op on one schedule micro-batch of a model stage is 1/mb_split of a configured one through
  // D/stages of a worker's slice.
  const double to_unit = static_cast<double>(s.mb_split) * s.stages / s.workers;
  OpCost busiest;
  double busiest_work = -1.0;
  for (const auto& ops : s.ops) {
    double forward = 0.0, forward_mbs = 0.0, backward = 0.0, backward_mbs = 0.0;
    for (const sched::Op& op : ops) {
      const double n = static_cast<double>(op.mbs.size());
      if (op.kind == sched::OpKind::F) {
        forward += n * stage_cost[op.stage].forward_ms;
        forward_mbs += n;
      } else if (op.kind != sched::OpKind::W) {  // B, or I standing for its whole backward
        backward += n * stage_cost[op.stage].backward_ms;
        backward_mbs += n;
      }
    }
    if (forward + backward > busiest_work && forward_mbs > 0 && backward_mbs > 0) {
      busiest_work = forward + backward;
      busiest = {forward / forward_mbs, backward / backward_mbs};
    }
  }
  return {busiest.forward_ms * to_unit, busiest.backward_ms * to_unit};
}

}  // namespace

void apply_network(const Network& net, sched::Costs& costs) {
  costs.alpha = net.alpha_ms;
  costs.beta = net.beta_ms_per_byte;
  costs.binomial_allreduce = net.binomial_allreduce;
  costs.rendezvous_bytes = net.rendezvous_bytes;
  costs.later_rank_weight = net.later_rank_weight;
  costs.ranks_per_host = net.ranks_per_host;
  costs.host_alpha = net.host_alpha_ms;
  costs.host_beta = net.host_beta_ms_per_byte;
}

Prediction Predictor::operator()(const Layout& l) {
  CHIMERA_REQUIRE(l.W >= 1 && l.D >= 1 && l.N >= 1 && l.B >= 1,
                  "W, D, N and B must be >= 1, got W={} D={} N={} B={}", l.W, l.D, l.N, l.B);
  const Built& built = build(l);
  const sched::Schedule& s = built.schedule;
  const int samples = sched::schedule_micro_batch_size(s, l.B, "the micro-batch size B");
  const std::vector<StageInfo>& st = stages(s.stages);
  const ComputeModel& compute = machine_.compute;
  const Network& net = machine_.network;

  double largest_stage_params = 0.0;
  for (const StageInfo& info : st) {
    largest_stage_params = std::max(largest_stage_params, info.params);
  }
  const OpCost per_op = compute.layers ? busiest_worker_op_cost(s, st, compute, samples)
                                       : compute.emulated;  // already in the simulator's unit
  sched::Costs costs;
  costs.F = per_op.forward_ms;
  costs.B = per_op.backward_ms;
  costs.W = costs.B * compute.weight_share;
  costs.I = costs.B - costs.W;
  if (l.recompute) {  // the forward runs again before the input gradient
    costs.B += costs.F;
    costs.I += costs.F;
  }
  costs.activation_bytes = shape_.message_bytes(l.B);
  costs.gradient_bytes = costs.activation_bytes;
  costs.stage_grad_bytes = 4.0 * largest_stage_params * s.stages / s.workers;
  costs.tied_grad_bytes = 4.0 * shape_.tied_params();
  costs.data_parallel = l.W;
  sched::Costs free_comm = costs;
  apply_network(net, costs);
  costs.layers = shape_.num_blocks();

  // The sharded program is the unsharded one plus its WaitGathers: the unsharded replay's makespan
  // is the sharded one's without what the gathers add.
  const sched::Simulator& simulator = l.shard_optimizer ? *built.sharded : built.simulator;
  const sched::SimResult ideal = simulator.run(free_comm);
  const sched::SimResult sim = simulator.run(costs);
  const double no_gather_makespan =
      l.shard_optimizer ? built.simulator.run(costs).makespan : sim.makespan;

  Prediction p;
  p.layout = l;
  p.work_ms = *std::max_element(ideal.busy.begin(), ideal.busy.end());
  p.bubble_ms = ideal.makespan - p.work_ms;
  p.p2p_ms = no_gather_makespan - ideal.makespan;
  p.gather_exposed_ms = sim.makespan - no_gather_makespan;
  p.gather_ms = sim.gather_total;
  p.bubble_ratio = sim.bubble_ratio;

  // The tied token table's sum is the simulator's too (the program's TiedGradReady).
  const double sync_end = sim.iteration_time;
  p.allreduce_ms = sim.allreduce_total;
  p.allreduce_hidden_ms = sim.allreduce_hidden;
  p.allreduce_exposed_ms = sim.allreduce_exposed;

  p.memory = worker_memory(s, st, shape_, samples, l.recompute, l.W, l.shard_optimizer);
  double most_updated = 0.0;  // parameters one worker updates: those of its moments
  for (const WorkerMemory& m : p.memory) {
    p.peak_memory_bytes = std::max(p.peak_memory_bytes, m.total());
    most_updated = std::max(most_updated, m.optimizer / 8.0);
  }
  p.optimizer_ms = most_updated * compute.optimizer_ns_per_param * 1e-6;
  p.iteration_ms = sync_end + p.optimizer_ms;
  p.samples_per_s = l.global_batch() / p.iteration_ms * 1e3;
  p.fits = p.peak_memory_bytes <= machine_.memory_bytes - machine_.reserve_bytes;
  return p;
}

}  // namespace chimera::plan
