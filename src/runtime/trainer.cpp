#include "chimera/runtime/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "batch_feed.hpp"
#include "chimera/backend/backend.hpp"
#include "chimera/comm/agreement.hpp"
#include "chimera/comm/communicators.hpp"
#include "chimera/comm/core_sharing.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/comm/local_rank.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/metrics.hpp"
#include "chimera/model/activations.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/optim/clip.hpp"
#include "chimera/optim/lr_schedule.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "chimera/runtime/train_state.hpp"
#include "chimera/schedule/simulate.hpp"
#include "emulated_compute.hpp"
#include "evaluator.hpp"
#include "executor.hpp"
#include "gpu_paths.hpp"
#include "grad_sums.hpp"
#include "message_staging.hpp"
#include "model_compute.hpp"
#include "trace_collector.hpp"

namespace chimera::runtime {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

model::Dims dims_of(const RunPlan& plan) {
  const auto& m = plan.model;
  return model::Dims{plan.schedule_mb_size, plan.seq_len,       m.n_embd, m.n_head,
                     m.vocab_size,          m.padded_vocab_size};
}

std::unique_ptr<EmulatedCompute> make_emulated(const RunPlan& plan) {
  const model::ParameterLayout layout(plan.model, plan.partition);
  const auto dims = dims_of(plan);
  const int last = plan.schedule.stages - 1;
  std::vector<EmulatedStage> held;
  for (const int s : plan.topology.held) {
    const model::StageShape shape{plan.partition.num_blocks(s), s == 0, s == last};
    held.push_back(EmulatedStage{s, layout.stage_floats(s),
                                 static_cast<std::int64_t>(model::activation_bytes_formula(
                                     dims, shape, plan.config.parallel.recompute))});
  }
  return std::make_unique<EmulatedCompute>(
      schedule::Costs::parse(plan.config.runtime.cost),
      schedule::work_per_micro_batch(plan.schedule), static_cast<std::size_t>(dims.N() * dims.C),
      std::move(held), layout.tied_floats(), plan.topology.holds_tied());
}

// The simulator's iteration time for the emulated costs (no network term): what an emulated
// run should measure.
double predicted_ms(const RunPlan& plan) {
  auto costs = schedule::Costs::parse(plan.config.runtime.cost);
  costs.data_parallel = plan.topology.replicas;
  return schedule::simulate(plan.schedule, costs).iteration_time;
}

// The schedule's own bubble: the simulator's idle share for the emulated costs, or for real
// compute F:B = 1:2 (a transformer layer's backward is about twice its forward).
double schedule_bubble(const RunPlan& plan) {
  const schedule::Costs costs = plan.emulate ? schedule::Costs::parse(plan.config.runtime.cost)
                                             : schedule::Costs::forward_backward(1.0, 2.0);
  return schedule::simulate(plan.schedule, costs).bubble_ratio;
}

std::string header(const RunPlan& plan, std::size_t params) {
  const auto& p = plan.config.parallel;
  const auto& t = plan.topology;
  std::string variant;
  if (p.scheme == "chimera")
    variant = fmt::format(" ({}, {} pipes)", plan.schedule.variant, plan.schedule.pipes());
  if (p.scheme == "interleaved") variant = fmt::format(" (v = {})", p.virtual_stages);
  return fmt::format(
      "chimera train: {} on {} ranks = W {} x D {}{}; N {} micro-batches of B {} x T {}; "
      "global batch {} samples ({} tokens)\n"
      "model: GPT-2 L {} C {} H {} V {} ({:.2f} M parameters), {} stages {}, compute {}{}",
      p.scheme + variant, t.world_size, t.replicas, t.workers,
      plan.schedule.stages != t.workers ? fmt::format(" ({} model stages)", plan.schedule.stages)
                                        : "",
      p.micro_batches, plan.micro_batch_size, plan.seq_len, plan.global_batch,
      plan.tokens_per_step(), plan.model.n_layer, plan.model.n_embd, plan.model.n_head,
      plan.model.vocab_size, static_cast<double>(params) / 1e6, plan.schedule.stages,
      plan.partition.to_string(), to_string(plan.config.runtime.compute),
      plan.emulate ? fmt::format(" (cost {} ms)", plan.config.runtime.cost) : "");
}

struct StepStats {
  double iter_s = 0.0;
  double pipeline_s = 0.0;
  double bubble = 0.0;
  double core_wait = 0.0;  // the part of `bubble` ranks were runnable but had no core
  std::int64_t peak_act = 0;
  bool stop = false;
};

// Timing and the stop flag of one step, gathered with two reductions.
StepStats reduce_step(MPI_Comm world, const IterationResult& r, double iter_s,
                      std::int64_t peak_act, bool stop) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(world, &size));
  double sums[3] = {r.compute_s, r.idle_queued_s.value_or(0.0), r.idle_queued_s ? 1.0 : 0.0};
  double maxes[4] = {iter_s, r.wall_s, static_cast<double>(peak_act), stop ? 1.0 : 0.0};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, world));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, maxes, 4, MPI_DOUBLE, MPI_MAX, world));
  StepStats s;
  s.iter_s = maxes[0];
  s.pipeline_s = maxes[1];
  // Measured bubble: the share of the pipeline phase the ranks spent not computing; core wait:
  // the part of it they were ready to run but had no core. The rest waited for messages.
  const double rank_seconds = size * maxes[1];
  s.bubble = maxes[1] > 0 ? 1.0 - sums[0] / rank_seconds : 0.0;
  s.core_wait = maxes[1] > 0 && sums[2] == size ? sums[1] / rank_seconds
                                                : std::numeric_limits<double>::quiet_NaN();
  s.peak_act = static_cast<std::int64_t>(maxes[2]);
  s.stop = maxes[3] > 0;
  return s;
}

struct LossAndNorm {
  double loss = 0.0;
  double grad_norm = 0.0;
  bool finite() const { return std::isfinite(loss) && std::isfinite(grad_norm); }
};

// The global-batch loss and the global gradient norm in one reduction (the norm's, which
// clipping needs anyway). Reduced to rank 0 and broadcast, so every rank holds the same bits:
// every replica applies the same clip factor, and every rank reaches the same verdict on whether
// the step is finite (a NaN in a sum stays NaN, an Inf in a sum of squares stays Inf).
LossAndNorm reduce_loss_and_norm(MPI_Comm world, const IterationResult& r, double grad_squares) {
  double local[3] = {r.loss_sum, static_cast<double>(r.loss_count), grad_squares};
  double total[3] = {0.0, 0.0, 0.0};
  MPI_CHECK(MPI_Reduce(local, total, 3, MPI_DOUBLE, MPI_SUM, 0, world));
  MPI_CHECK(MPI_Bcast(total, 3, MPI_DOUBLE, 0, world));
  return LossAndNorm{total[1] > 0 ? total[0] / total[1] : 0.0, std::sqrt(total[2])};
}

// One line for a step whose loss or gradient norm is not finite, naming where it came from as
// far as it is known: the loss comes out of the last stage; a gradient turns non-finite in the
// backward pass, which runs from the last stage to the first, so the highest stage whose
// gradient is non-finite produced it (the tied embedding sums the first and last stages').
std::string describe_nonfinite(std::int64_t step, const LossAndNorm& v, int stages,
                               const std::vector<int>& bad_stages) {
  std::vector<std::string> parts;
  if (!std::isfinite(v.loss))
    parts.push_back(
        fmt::format("the loss is {} (computed by the last stage, {})", v.loss, stages - 1));
  if (!std::isfinite(v.grad_norm)) {
    std::string where;
    if (!bad_stages.empty()) {
      const int first = bad_stages.back();
      where = first == model::kTiedStage
                  ? " (first in the tied embedding wte)"
                  : fmt::format(
                        " (first in stage {}'s gradient, as the backward runs from the "
                        "last stage to the first)",
                        first);
    }
    parts.push_back(fmt::format("the gradient norm is {}{}", v.grad_norm, where));
  }
  return fmt::format("step {}: {}", step + 1, fmt::join(parts, " and "));
}

// Test hook, for the fault tests only: CHIMERA_TEST_HANG_AT="RANK:STEP" makes that world rank
// stop answering before step STEP (1-based, as the log counts), as a rank stuck in a driver or
// on a dead node would, so that runtime.watchdog_s can be tested; "RANK:STEP:save" makes it stop
// inside the save of the checkpoint of step STEP, as a rank stuck in a failed file system would,
// for checkpoint.save_timeout_s. Unset in every real run.
struct HangHook {
  int rank = -1;
  long long step = -1;
  bool in_save = false;
  static HangHook from_environment() {
    HangHook h;
    if (const char* v = std::getenv("CHIMERA_TEST_HANG_AT")) {
      char phase[8] = {};
      const int fields = std::sscanf(v, "%d:%lld:%7s", &h.rank, &h.step, phase);
      h.in_save = fields == 3 && std::string_view(phase) == "save";
      if (fields < 2 || (fields == 3 && !h.in_save)) h = HangHook{};
    }
    return h;
  }
  // `at_step` 1-based; `saving`: inside the save of that step's checkpoint, else before it.
  void maybe_hang(int my_rank, std::int64_t at_step, bool saving) const {
    if (saving != in_save || my_rank != rank || at_step != step) return;
    log::info_all("test hook CHIMERA_TEST_HANG_AT: rank {} hangs {} step {}", rank,
                  saving ? "in the save of" : "before", step);
    while (true) sleep_seconds(1.0);
  }
};

}  // namespace

struct Trainer::Impl {
  TrainRequest request;
  MPI_Comm world;
  int rank = 0;
  int size = 1;
  RunPlan plan;
  std::unique_ptr<comm::Communicators> comms;
  comm::WaitPolicy wait_policy;
  comm::NodeLocalRank local_rank;  // the GPU backends' device choice
  comm::CoreSharing cores;
  double schedule_bubble_ratio = 0.0;  // the simulator's, printed beside the measured bubble
  std::unique_ptr<backend::Backend> backend;
  std::unique_ptr<model::GPT2Worker> worker;
  GpuPaths paths;  // direct messages, MPI_Iallreduce: a host-memory backend's paths
  std::optional<MessageStaging> staging;
  std::unique_ptr<GradSums> grad_sums;  // GPU backends only
  std::unique_ptr<StageCompute> compute;
  std::optional<TrainState> state;
  std::optional<BatchFeed> feed;
  std::optional<Evaluator> evaluator;
  std::optional<io::CheckpointDirectory> checkpoints;
  std::int64_t start_step = 0;
  std::int64_t resume_cursor = 0;  // data stream position at start_step
  std::int64_t skipped_steps = 0;  // updates left out by train.on_nonfinite = skip, in all
  int consecutive_skips = 0;
  HangHook hang_hook = HangHook::from_environment();
  std::size_t params = 0;
  std::vector<double> losses;
  optim::LrSchedule lr_schedule;
  std::vector<std::int32_t> sample_prompt;   // replica 0, when log.sample_tokens > 0
  std::optional<data::Tokenizer> tokenizer;  // replica 0, for GPT-2's vocabulary

  Impl(const TrainRequest& req, MPI_Comm w);
  void setup_backend();
  void setup_compute();
  void setup_sample_prompt();
  void print_sample(const std::string& when);
  void load_start_state();
  void check_resumable(const std::string& path, const io::CheckpointMeta& meta) const;
  bool save(const io::CheckpointMeta& meta, bool last);
  void run();
};

Trainer::Impl::Impl(const TrainRequest& req, MPI_Comm w) : request(req), world(w) {
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const Config& config = request.config;
  comm::all_or_none(world, [&] {
    plan = RunPlan::make(config, size, rank);
    CHIMERA_REQUIRE(!(request.resume && !request.init.empty()),
                    "--resume and --init exclude each other: --resume continues a run from "
                    "checkpoint.dir, --init starts a new one from a checkpoint's weights");
    CHIMERA_REQUIRE(request.stop_after >= 0, "--stop-after {}: must be >= 0", request.stop_after);
    CHIMERA_REQUIRE(!request.resume || !config.checkpoint.dir.empty(),
                    "--resume needs the checkpoint directory: --save-dir DIR (checkpoint.dir)");
    CHIMERA_REQUIRE(!plan.emulate || (config.checkpoint.dir.empty() && request.init.empty() &&
                                      config.train.eval_every == 0),
                    "--compute emulate has no weights: drop --save-dir, --init and --eval-every");
    const int sample_tokens = config.log.sample_tokens;
    CHIMERA_REQUIRE(sample_tokens >= 0, "log.sample_tokens = {} must be >= 0", sample_tokens);
    CHIMERA_REQUIRE(sample_tokens == 0 || config.train.eval_every > 0,
                    "log.sample_tokens = {} prints a sample with each validation loss: set "
                    "train.eval_every (--eval-every K) too",
                    sample_tokens);
    CHIMERA_REQUIRE(sample_tokens == 0 || !config.parallel.recompute,
                    "log.sample_tokens = {} needs the last stage's activations, which "
                    "parallel.recompute = true does not keep: set one of them off",
                    sample_tokens);
    CHIMERA_REQUIRE(config.train.max_skipped_steps >= 1,
                    "train.max_skipped_steps = {}: must be at least 1",
                    config.train.max_skipped_steps);
    CHIMERA_REQUIRE(config.checkpoint.save_timeout_s >= 0.0,
                    "checkpoint.save_timeout_s = {}: use 0 (no bound) or a number of seconds",
                    config.checkpoint.save_timeout_s);
    CHIMERA_REQUIRE(config.runtime.watchdog_s >= 0.0,
                    "runtime.watchdog_s = {}: use 0 (off) or a number of seconds",
                    config.runtime.watchdog_s);
  });
  comms = std::make_unique<comm::Communicators>(plan.topology, world);
  comm::all_or_none(world, [&] { local_rank = comm::node_local_rank(world, comm::process_env); });
  const std::string local_ranks =
      comm::describe_node_local_ranks(comm::gather_node_local_ranks(world, local_rank));
  wait_policy.doorbells = config.runtime.wait == WaitMode::Doorbell;
  wait_policy.watchdog_s = config.runtime.watchdog_s;
  if (!plan.emulate) setup_backend();
  comm::all_or_none(world, [&] { setup_compute(); });
  load_start_state();
  log::info("{}", header(plan, params));
  log::info("{}", plan.topology.describe());
  log::info("{}", local_ranks);
  cores = comm::core_sharing(world);
  schedule_bubble_ratio = schedule_bubble(plan);
  log::info("schedule bubble {:.1f}% (simulated{})", 100.0 * schedule_bubble_ratio,
            plan.emulate ? " for these costs" : ", F:B = 1:2");
  if (cores.oversubscribed())
    log::info(
        "{} ranks share {} cores on this node: of the measured bubble, 'core wait' is the part "
        "ranks were ready to run but had no core; the rest is waiting for messages",
        cores.ranks_on_node, cores.cores);
  if (plan.emulate) {
    log::info("simulator: {:.2f} ms per iteration for these costs", predicted_ms(plan));
  }
}

// The backend on every rank (agreed: a rank without a GPU fails them all), then, for a GPU
// backend, the paths of messages and gradient sums from every rank's facts (docs/cuda.md).
void Trainer::Impl::setup_backend() {
  const Config& config = request.config;
  backend::BackendOptions options;
  options.precision = config.runtime.precision;
  options.local_rank = local_rank.rank;
  comm::all_or_none(world,
                    [&] { backend = backend::make_backend(config.runtime.backend, options); });
  if (!backend->host_memory()) {
    const GpuFacts facts = gather_gpu_facts(world, *backend, plan.schedule, plan.program);
    comm::all_or_none(world, [&] {
      paths = choose_gpu_paths(config.runtime.messages, config.runtime.allreduce, facts);
    });
    log::info("{}", backend->description());
    log::info("{}", paths.reason);
    grad_sums = std::make_unique<GradSums>(*backend, paths.sums, *comms, plan.topology);
  }
}

void Trainer::Impl::setup_compute() {
  const Config& config = request.config;
  lr_schedule = optim::LrSchedule::from(config.train);
  const model::ParameterLayout layout(plan.model, plan.partition);
  params = layout.tied().numel;
  for (int s = 0; s < plan.schedule.stages; ++s) {
    for (const auto& t : layout.stage_tensors(s)) params += t.numel;
  }
  if (plan.emulate) {
    compute = make_emulated(plan);
  } else {
    worker = std::make_unique<model::GPT2Worker>(
        *backend, plan.model, plan.partition, plan.topology.held,
        model::GPT2Worker::Options{plan.schedule_mb_size, plan.seq_len, config.parallel.recompute});
    worker->init_parameters(static_cast<std::uint64_t>(config.train.seed));
    staging.emplace(*backend, paths.messages, worker->message_floats());
    compute = std::make_unique<ModelCompute>(*worker, *staging, grad_sums.get());
    state.emplace(plan, *backend, *worker, *comms);
    if (config.train.eval_every > 0) {
      evaluator.emplace(plan, *worker, *staging, *comms, wait_policy);
    }
    if (config.log.sample_tokens > 0 && plan.topology.replica == 0) setup_sample_prompt();
  }
  feed.emplace(plan);
  if (!config.checkpoint.dir.empty()) {
    checkpoints.emplace(config.checkpoint.dir, config.checkpoint.keep);
  }
}

// Where training starts: --resume takes the newest checkpoint in checkpoint.dir that loads (a
// missing or damaged file falls back to the one before, and says so), --init a checkpoint's
// weights. Every attempt is agreed on by every rank, as each reads only its own tensors.
void Trainer::Impl::load_start_state() {
  const Config& config = request.config;
  if (!request.init.empty()) {
    std::string conversions;
    comm::all_or_none(world, [&] { conversions = state->init(request.init); });
    log::info("initialised weights from {}{}", request.init,
              conversions.empty() ? "" : " (" + conversions + ")");
    return;
  }
  if (!request.resume) return;
  std::vector<std::string> candidates;
  comm::all_or_none(world, [&] { candidates = checkpoints->resume_candidates(); });
  if (candidates.empty()) {
    log::info("no checkpoint in {} yet: starting from step 0", config.checkpoint.dir);
    return;
  }
  std::vector<std::string> unusable;
  for (const auto& path : candidates) {
    io::CheckpointMeta meta;
    try {
      comm::all_or_none(world, [&] { meta = io::CheckpointReader(path).meta(); });
    } catch (const comm::AgreedError& e) {
      log::warn_once("cannot resume from {}: {}; trying the checkpoint before it", path, e.what());
      unusable.push_back(path);
      continue;
    }
    // A different model is the user's mistake, not damage: no fallback hides it.
    comm::all_or_none(world, [&] { check_resumable(path, meta); });
    try {
      comm::all_or_none(world, [&] { state->resume(path); });
    } catch (const comm::AgreedError& e) {
      if (e.status() != kExitInput) throw;
      log::warn_once("cannot resume from {}: {}; trying the checkpoint before it", path, e.what());
      unusable.push_back(path);
      continue;
    }
    start_step = meta.step;
    resume_cursor = meta.data_cursor;
    skipped_steps = meta.skipped_steps;
    if (unusable.empty()) {
      log::info("resumed from {} at step {}", path, start_step);
    } else {
      log::info("resumed from {} at step {}, the newest checkpoint that loads (not: {})", path,
                start_step, fmt::join(unusable, ", "));
    }
    return;
  }
  throw comm::AgreedError(
      fmt::format("--resume: no checkpoint in {} can be loaded (tried {}); move them away to "
                  "start afresh",
                  config.checkpoint.dir, fmt::join(unusable, ", ")),
      kExitInput, 0);
}

// A checkpoint of another model shape cannot continue this run (an InputError naming both);
// other settings may differ, and this run's values apply (the log says which).
void Trainer::Impl::check_resumable(const std::string& path, const io::CheckpointMeta& meta) const {
  const Config& config = request.config;
  const Config saved = Config::from_toml(meta.config, path + " (its config attribute)");
  auto shape = [](const ModelConfig& m) {
    return fmt::format("L {} C {} H {} T {} V {}", m.n_layer, m.n_embd, m.n_head, m.n_ctx,
                       m.vocab_size);
  };
  CHIMERA_REQUIRE(Config::differences(saved, config, "model").empty(),
                  "{}: the checkpoint's model is {} but this run's is {} (model.n_layer, n_embd, "
                  "n_head, n_ctx, vocab_size): resume with the checkpoint's [model] settings",
                  path, shape(saved.model), shape(config.model));
  std::vector<std::string> changed;
  for (const auto& d : Config::differences(saved, config, "train"))
    changed.push_back(fmt::format("{} = {} (checkpoint: {})", d.key, d.b, d.a));
  if (!changed.empty())
    log::info("resuming with this run's settings where they differ from the checkpoint's: {}",
              fmt::join(changed, ", "));
}

// Saves a checkpoint of the current state; every rank agrees on the outcome. A failure stops
// the run (status 1), or with checkpoint.on_save_error = warn is reported and the next save
// tries again; the last save of a run (the end, a signal, --stop-after) has no next one, so its
// failure always stops the run. Returns whether the checkpoint was written.
bool Trainer::Impl::save(const io::CheckpointMeta& meta, bool last) {
  std::string path;
  const double limit_s = request.config.checkpoint.save_timeout_s;
  const std::string target = checkpoints->path_for_step(meta.step);
  // Parallel HDF5 can wait forever when a rank's file system fails mid-save; this bounds it.
  const comm::Deadline deadline(limit_s, [directory = *checkpoints, target, limit_s] {
    std::string cause = directory.vanished();
    if (cause.empty()) cause = "a rank's file system may have failed in the middle of the write";
    return fmt::format(
        "saving {} has not finished after {:.0f} s (checkpoint.save_timeout_s): {}; ending the "
        "job, the previous checkpoints are intact",
        target, limit_s, cause);
  });
  try {
    comm::all_or_none(world, [&] {
      hang_hook.maybe_hang(rank, meta.step, true);
      path = state->save(*checkpoints, meta);
    });
  } catch (const comm::AgreedError& e) {
    if (request.config.checkpoint.on_save_error != SaveErrorPolicy::Warn || last) throw;
    log::warn_once(
        "checkpoint of step {} not saved: {}; training goes on "
        "(checkpoint.on_save_error = warn), the previous checkpoint is intact",
        meta.step, e.what());
    return false;
  }
  log::info("saved {}", path);
  return true;
}

// The prompt of the samples printed during training: text through GPT-2's tokenizer (empty:
// the end-of-text token, as llm.c starts its samples), or ids for other vocabularies.
void Trainer::Impl::setup_sample_prompt() {
  const LogConfig& log = request.config.log;
  if (plan.model.vocab_size == data::kGpt2VocabSize) {
    tokenizer.emplace(data::Tokenizer::load(log.tokenizer));
    sample_prompt = log.sample_prompt.empty() ? std::vector{tokenizer->eos_token()}
                                              : tokenizer->encode(log.sample_prompt);
  } else {
    sample_prompt =
        model::parse_token_ids(log.sample_prompt, plan.model.vocab_size, "log.sample_prompt");
    if (log.sample_prompt.find_first_not_of(" ,\t\n") == std::string::npos) sample_prompt = {0};
  }
  CHIMERA_REQUIRE(!sample_prompt.empty(), "log.sample_prompt = \"{}\" has no token",
                  log.sample_prompt);
}

// A sample of log.sample_tokens tokens, drawn with the same seed every time so that samples of
// different steps compare; rank 0 prints it.
void Trainer::Impl::print_sample(const std::string& when) {
  const Config& config = request.config;
  if (!evaluator || config.log.sample_tokens == 0) return;
  model::TokenSampler sampler(
      model::SamplingOptions{1.0, 0, static_cast<std::uint64_t>(config.train.seed)});
  const auto generated = evaluator->sample(sample_prompt, config.log.sample_tokens, sampler);
  if (rank != 0) return;
  std::string text;
  if (tokenizer) {
    std::vector<std::int32_t> shown;
    if (!config.log.sample_prompt.empty()) shown = sample_prompt;
    shown.insert(shown.end(), generated.begin(), generated.end());
    text = tokenizer->decode(shown);
  } else {
    text = fmt::format("{}", fmt::join(generated, " "));
  }
  log::info("sample {}: {}", when, text);
}

void Trainer::Impl::run() {
  const Config& config = request.config;
  Executor executor(plan.schedule, plan.program, plan.topology, *comms, *compute, wait_policy);
  TraceCollector trace(world, config.log.trace);
  io::MetricsWriter metrics;
  if (rank == 0 && !config.log.metrics.empty()) {
    metrics = io::MetricsWriter(config.log.metrics, request.resume && start_step > 0);
  }
  const double predicted = plan.emulate ? predicted_ms(plan) : 0.0;
  // Where ranks outnumber cores, the measured bubble is part core sharing: say how much.
  auto core_wait = [this](double share, std::string_view format) {
    return cores.oversubscribed() && std::isfinite(share)
               ? fmt::format(fmt::runtime(format), 100.0 * share)
               : std::string();
  };

  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);

  const int steps = config.train.steps;
  double sum_iter_s = 0.0, sum_bubble = 0.0, sum_core_wait = 0.0;
  int timed_steps = 0;
  std::int64_t step = start_step;
  const Stopwatch run_clock;
  try {
    if (evaluator && step < steps) {
      // Where the run starts from (fresh, --init or --resume), before any update.
      log::info("validation loss before step {}: {:.6f}", step + 1, evaluator->evaluate());
      print_sample(fmt::format("before step {}", step + 1));
    }
    for (; step < steps; ++step) {
      hang_hook.maybe_hang(rank, step + 1, false);
      const Stopwatch iter_clock;
      const std::int64_t cursor = resume_cursor + (step - start_step) * plan.global_batch;
      const auto& inputs = feed->load(cursor);
      compute->zero_grad();
      compute->reset_peak_activation_bytes();
      const IterationResult r =
          executor.run(step, inputs, plan.loss_scale(), trace.events(), trace.origin_s());
      const double lr = lr_schedule.at(static_cast<int>(step));
      const LossAndNorm v =
          reduce_loss_and_norm(world, r, state ? state->local_grad_squares() : 0.0);
      const bool finite = v.finite();
      const bool skip = !finite && config.train.on_nonfinite == NonfinitePolicy::Skip;
      if (finite) {
        consecutive_skips = 0;
        // AdamW counts the updates made: skipped steps do not advance its bias correction.
        if (state)
          state->optimizer_step(static_cast<int>(step - skipped_steps), lr,
                                optim::clip_scale(v.grad_norm, config.train.grad_clip));
      } else if (skip) {
        ++skipped_steps;
        ++consecutive_skips;
      }
      const StepStats s = reduce_step(world, r, iter_clock.seconds(),
                                      compute->peak_activation_bytes(), g_stop_signal != 0);
      const bool stop_here = request.stop_after > 0 && step + 1 - start_step >= request.stop_after;
      losses.push_back(v.loss);
      if (step > start_step || steps - start_step == 1) {  // the first step warms caches up
        sum_iter_s += s.iter_s;
        sum_bubble += s.bubble;
        sum_core_wait += s.core_wait;
        ++timed_steps;
      }
      io::StepMetrics m;
      m.step = step;
      m.loss = v.loss;
      m.lr = lr;
      m.grad_norm = v.grad_norm;
      m.iter_ms = s.iter_s * 1e3;
      m.tokens_per_s = static_cast<double>(plan.tokens_per_step()) / s.iter_s;
      m.bubble_ratio = s.bubble;
      m.core_wait_ratio = s.core_wait;
      m.peak_act_bytes = s.peak_act;
      m.skipped = skip;
      m.skipped_steps = skipped_steps;
      if (finite && evaluator && (step + 1) % config.train.eval_every == 0) {
        m.val_loss = evaluator->evaluate();
      }
      if (metrics.is_open()) metrics.write(m);
      if ((step + 1) % config.log.every == 0 || step + 1 == steps || m.val_loss || !finite) {
        log::info(
            "step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad-norm {:.3f} | {:8.1f} ms{} | "
            "{:8.0f} tok/s | bubble {:5.1f}%{} | act {:.1f} MiB{}",
            step + 1, steps, v.loss, m.val_loss ? fmt::format(" | val {:.4f}", *m.val_loss) : "",
            lr, v.grad_norm, m.iter_ms, plan.emulate ? fmt::format(" (sim {:.1f})", predicted) : "",
            m.tokens_per_s, 100.0 * s.bubble, core_wait(s.core_wait, " (core wait {:.1f}%)"),
            static_cast<double>(s.peak_act) / (1 << 20),
            skip ? fmt::format(" | skipped ({} in all)", skipped_steps) : "");
      }
      if (m.val_loss) print_sample(fmt::format("after step {}", step + 1));
      if (!finite) {
        // Every rank holds the same loss and norm, so every rank gets here in the same step.
        const std::string what =
            describe_nonfinite(step, v, plan.schedule.stages,
                               state && !std::isfinite(v.grad_norm) ? state->nonfinite_grad_stages()
                                                                    : std::vector<int>{});
        const std::string kept =
            checkpoints
                ? fmt::format("; {}/latest names the last good checkpoint", config.checkpoint.dir)
                : "";
        if (!skip) {
          throw DivergedError(fmt::format(
              "training diverged at {}; no update was applied and nothing of it saved{} "
              "(train.on_nonfinite = skip would skip such steps)",
              what, kept));
        }
        if (consecutive_skips >= config.train.max_skipped_steps) {
          throw DivergedError(fmt::format(
              "training diverged: {} consecutive steps skipped (train.max_skipped_steps), the "
              "last at {}{}",
              consecutive_skips, what, kept));
        }
        log::warn_once("{}; update skipped ({} in a row, {} in all; train.on_nonfinite = skip)",
                       what, consecutive_skips, skipped_steps);
      }
      const bool last_save = s.stop || stop_here || step + 1 == steps;
      // A skipped step changed nothing: a periodic save of it would only rotate older
      // checkpoints away while the run may be diverging.
      const bool save_now =
          checkpoints && (last_save || (!skip && config.checkpoint.every > 0 &&
                                        (step + 1) % config.checkpoint.every == 0));
      if (save_now) {
        io::CheckpointMeta meta{step + 1, config.train.seed, cursor + plan.global_batch,
                                config.to_toml()};
        meta.skipped_steps = skipped_steps;
        save(meta, last_save);
      }
      if (s.stop || stop_here) {
        log::info("stopping after step {}{}", step + 1,
                  s.stop ? fmt::format(" on signal {}", static_cast<int>(g_stop_signal))
                         : fmt::format(" (--stop-after {})", request.stop_after));
        ++step;
        break;
      }
    }
    trace.write();
  } catch (const comm::AgreedError&) {
    throw;  // every rank leaves together (a failed save), with one message
  } catch (const DivergedError& e) {
    // Every rank reached the same verdict in the same step: leave together, without an abort.
    throw comm::AgreedError(e.what(), exit_status(e), rank);
  } catch (const std::exception& e) {
    // Other ranks may be inside a collective or waiting for this rank's messages: end them all.
    comm::abort_job(e.what(), exit_status(e));
  }
  if (timed_steps > 0) {
    const double mean_s = sum_iter_s / timed_steps;
    log::info(
        "done: {} steps in {:.1f} s; mean iteration {:.1f} ms, {:.0f} tokens/s, bubble "
        "{:.1f}% ({}the schedule's {:.1f}%){}",
        step - start_step, run_clock.seconds(), mean_s * 1e3,
        static_cast<double>(plan.tokens_per_step()) / mean_s, 100.0 * sum_bubble / timed_steps,
        core_wait(sum_core_wait / timed_steps, "core wait {:.1f}%, "),
        100.0 * schedule_bubble_ratio,
        config.log.trace.empty() ? "" : fmt::format("; trace in {}", config.log.trace));
  }
}

Trainer::Trainer(const TrainRequest& request, MPI_Comm world)
    : impl_(std::make_unique<Impl>(request, world)) {}
Trainer::~Trainer() = default;
void Trainer::run() {
  impl_->run();
}
const std::vector<double>& Trainer::losses() const {
  return impl_->losses;
}

std::optional<std::vector<float>> Trainer::tensor(const std::string& name) const {
  if (!impl_->worker) return std::nullopt;
  return impl_->state->host_tensor(name);
}

}  // namespace chimera::runtime
