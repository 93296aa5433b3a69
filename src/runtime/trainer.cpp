#include "chimera/runtime/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "batch_feed.hpp"
#include "checkpointing.hpp"
#include "chimera/comm/agreement.hpp"
#include "chimera/comm/communicators.hpp"
#include "chimera/comm/core_sharing.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/comm/local_rank.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/comm/mpi_transport.hpp"
#include "chimera/comm/peer_probe.hpp"
#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/config_checks.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/metrics.hpp"
#include "chimera/io/paths.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/optim/clip.hpp"
#include "chimera/optim/lr_schedule.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "chimera/schedule/simulate.hpp"
#include "executor.hpp"
#include "hang_hook.hpp"
#include "host_memory.hpp"
#include "nonfinite_guard.hpp"
#include "read_once.hpp"
#include "run_compute.hpp"
#include "step_cycle.hpp"
#include "step_report.hpp"
#include "step_watchdog.hpp"
#include "stop_signals.hpp"
#include "trace_collector.hpp"

namespace chimera::runtime {

namespace {

std::string header(const RunPlan& plan, std::size_t params, const std::string& compute) {
  const auto& p = plan.config.parallel;
  const auto& t = plan.topology;
  std::string variant;
  if (p.scheme == "chimera")
    variant = fmt::format(" ({}, {} pipes)", plan.schedule.variant, plan.schedule.pipes());
  if (p.scheme == "interleaved") variant = fmt::format(" (v = {})", p.virtual_stages);
  return fmt::format(
      "chimera train: {} on {} ranks = W {} x D {}{}; N {} micro-batches of B {} x T {}; "
      "global batch {} samples ({} tokens)\n"
      "model: GPT-2 L {} C {} H {} V {} ({:.2f} M parameters), {} stages {}, compute {}",
      p.scheme + variant, t.world_size, t.replicas, t.workers,
      plan.schedule.stages != t.workers ? fmt::format(" ({} model stages)", plan.schedule.stages)
                                        : "",
      plan.batch.micro_batches, plan.batch.micro_batch_size, plan.seq_len, plan.global_batch(),
      plan.tokens_per_step(), plan.model.n_layer, plan.model.n_embd, plan.model.n_head,
      plan.model.vocab_size, static_cast<double>(params) / 1e6, plan.schedule.stages,
      plan.partition.to_string(), compute);
}

// Parameters of the whole model, the tied embedding once.
std::size_t parameter_count(const RunPlan& plan) {
  const model::ParameterLayout layout(plan.model, plan.partition);
  std::size_t params = layout.tied().numel;
  for (int s = 0; s < plan.schedule.stages; ++s) {
    for (const auto& t : layout.stage_tensors(s)) params += t.numel;
  }
  return params;
}

// The weights of a Chimera checkpoint belong to the [model] its config attribute names. Their
// shapes alone do not pin it (n_head splits C without changing a shape), so another [model]
// cannot continue or start from them: an InputError naming both, and `remedy`.
Config require_same_model(const std::string& path, const std::string& saved_toml,
                          const Config& config, std::string_view remedy) {
  const Config saved = Config::from_toml(saved_toml, path + " (its config attribute)");
  auto shape = [](const ModelConfig& m) {
    return fmt::format("L {} C {} H {} T {} V {}", m.n_layer, m.n_embd, m.n_head, m.n_ctx,
                       m.vocab_size);
  };
  CHIMERA_REQUIRE(Config::differences(saved, config, "model").empty(),
                  "{}: the checkpoint's model is {} but this run's is {} (model.n_layer, n_embd, "
                  "n_head, n_ctx, vocab_size): {}",
                  path, shape(saved.model), shape(config.model), remedy);
  return saved;
}

}  // namespace

struct Trainer::Impl {
  TrainRequest request;
  MPI_Comm world;
  int rank = 0;
  int size = 1;
  RunPlan plan;
  std::unique_ptr<comm::Communicators> comms;
  comm::WaitPolicy wait_policy;
  std::optional<StepWatchdog> watchdog;  // wait_policy reads its limit: declared before users
  comm::NodeLocalRank local_rank;        // the GPU backends' device choice
  comm::CoreSharing cores;
  double schedule_bubble_ratio = 0.0;   // the simulator's, printed beside the measured bubble
  std::optional<double> predicted_ms;   // the simulator's iteration time (emulation), per step
  std::unique_ptr<RunCompute> compute;  // real or emulated, and what that mode owns
  std::optional<BatchFeed> feed;
  std::optional<Checkpointing> checkpointing;  // where checkpoint.dir is set
  std::int64_t start_step = 0;
  std::int64_t resume_cursor = 0;  // data stream position at start_step
  std::int64_t skipped_steps = 0;  // updates left out by train.on_nonfinite = skip, before now
  HangHook hang_hook = HangHook::from_environment();
  std::vector<double> losses;
  optim::LrSchedule lr_schedule;

  Impl(const TrainRequest& req, MPI_Comm w);
  void load_start_state();
  void check_resumable(const std::string& path, const io::CheckpointMeta& meta) const;
  io::MetricsWriter open_metrics() const;
  void run();
};

Trainer::Impl::Impl(const TrainRequest& req, MPI_Comm w) : request(req), world(w) {
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const Config& config = request.config;
  comm::all_or_none(world, [&] {
    check_config(config);
    if (config.runtime.compute != ComputeMode::Emulate &&
        config.runtime.backend == BackendKind::Cpu) {
      const auto too_large = exceeds_host_memory(config, physical_memory_bytes());
      CHIMERA_REQUIRE(!too_large, "{}", *too_large);
    }
    plan = RunPlan::make(config, size, rank);
    CHIMERA_REQUIRE(!(request.resume && !request.init.empty()),
                    "--resume and --init exclude each other: --resume continues a run from "
                    "checkpoint.dir, --init starts a new one from a checkpoint's weights");
    CHIMERA_REQUIRE(request.stop_after >= 0, "--stop-after {}: must be >= 0 (0 = off)",
                    request.stop_after);
    // Without a checkpoint the next job of the chain has nothing to resume from.
    CHIMERA_REQUIRE(request.stop_after == 0 || !config.checkpoint.dir.empty(),
                    "--stop-after {} stops the run to be resumed by a later job, which needs a "
                    "checkpoint: add --save-dir DIR (checkpoint.dir), or drop --stop-after",
                    request.stop_after);
    CHIMERA_REQUIRE(!request.resume || !config.checkpoint.dir.empty(),
                    "--resume needs the checkpoint directory: --save-dir DIR (checkpoint.dir)");
    CHIMERA_REQUIRE(!plan.emulate || (config.checkpoint.dir.empty() && request.init.empty() &&
                                      config.train.eval_every == 0),
                    "--compute emulate has no weights: drop --save-dir, --init and --eval-every");
  });
  comms = std::make_unique<comm::Communicators>(plan.topology, world);
  comm::all_or_none(world, [&] { local_rank = comm::node_local_rank(world, comm::process_env); });
  const std::string local_ranks =
      comm::describe_node_local_ranks(comm::gather_node_local_ranks(world, local_rank));
  wait_policy.doorbells = config.runtime.wait == WaitMode::Doorbell;
  watchdog.emplace(config.runtime.watchdog_s);
  watchdog->apply(wait_policy);
  comm::set_rank_hosts(comm::gather_host_names(world));
  comm::start_answering_probes(world);
  // Data and output files before the model is built: a mistake in a path is reported at once,
  // not after minutes of setup, nor after the last step (a metrics file rank 0 cannot open
  // used to end it alone and leave the others waiting).
  comm::all_or_none(world, [&] {
    lr_schedule = optim::LrSchedule::from(config.train);
    feed.emplace(plan);
    if (!config.checkpoint.dir.empty())
      checkpointing.emplace(config, world, rank, hang_hook, wait_policy);
    if (rank != 0) return;
    if (checkpointing) checkpointing->claim_directory();
    if (!config.log.metrics.empty()) io::require_writable(config.log.metrics, "--metrics");
    if (!config.log.trace.empty()) io::require_writable(config.log.trace, "--trace");
  });
  compute = RunCompute::make(plan, world, *comms, wait_policy, local_rank, rank);
  load_start_state();
  log::info("{}", header(plan, parameter_count(plan), compute->describe()));
  log::info("{}", plan.topology.describe());
  log::info("{}", local_ranks);
  log::info("{}", watchdog->describe());
  cores = comm::core_sharing(world);
  schedule_bubble_ratio = schedule::simulate(plan.schedule, compute->bubble_costs()).bubble_ratio;
  // Agreed: ranks on nodes of different sizes could disagree on whether runtime.network fits.
  std::optional<IterationPrediction> predicted;
  comm::all_or_none(world, [&] { predicted = compute->predicted(cores.ranks_on_node); });
  if (predicted) predicted_ms = predicted->ms;
  log::info("schedule bubble {:.1f}% (simulated{})", 100.0 * schedule_bubble_ratio,
            predicted ? " for these costs" : ", F:B = 1:2");
  if (cores.oversubscribed())
    log::info(
        "{} ranks share {} cores on this node: of the measured bubble, 'core wait' is the part "
        "ranks were ready to run but had no core; the rest is waiting for messages",
        cores.ranks_on_node, cores.cores);
  if (predicted)
    log::info("simulator: {:.2f} ms per iteration {}", predicted->ms, predicted->basis);
}

// Where training starts: --resume takes the newest checkpoint in checkpoint.dir that loads (a
// missing or damaged file falls back to the one before, and says so), --init a checkpoint's
// weights. Every attempt is agreed on by every rank, as each reads only its own tensors.
void Trainer::Impl::load_start_state() {
  const Config& config = request.config;
  if (!request.init.empty()) {
    std::string conversions;
    comm::all_or_none(world, [&] {
      if (rank != 0) return;
      const io::CheckpointReader reader(request.init);
      if (reader.is_chimera_checkpoint()) {
        require_same_model(request.init, reader.meta().config, config,
                           "start with the checkpoint's [model] settings");
      }
    });
    conversions = compute->state().init(request.init);
    log::info("initialised weights from {}{}{}", request.init,
              conversions.empty() ? "" : " (" + conversions + ")",
              describe_load(request.init, compute->state().last_load_bytes()));
    return;
  }
  if (!request.resume) return;
  std::vector<std::string> candidates;
  comm::all_or_none(world, [&] { candidates = checkpointing->directory().resume_candidates(); });
  if (candidates.empty()) {
    log::info("no checkpoint in {} yet: starting from step 0", config.checkpoint.dir);
    return;
  }
  std::vector<std::string> unusable;
  for (const auto& path : candidates) {
    io::CheckpointMeta meta;
    try {
      meta = read_meta_once(world, path);
    } catch (const comm::AgreedError& e) {
      log::warn_once("cannot resume from {}: {}; trying the checkpoint before it", path, e.what());
      unusable.push_back(path);
      continue;
    }
    // A different model is the user's mistake, not damage: no fallback hides it.
    comm::all_or_none(world, [&] { check_resumable(path, meta); });
    try {
      compute->state().resume(path);
    } catch (const comm::AgreedError& e) {
      if (e.status() != kExitInput) throw;
      log::warn_once("cannot resume from {}: {}; trying the checkpoint before it", path, e.what());
      unusable.push_back(path);
      continue;
    }
    start_step = meta.step;
    resume_cursor = meta.data_cursor;
    skipped_steps = meta.skipped_steps;
    const std::string read = describe_load(path, compute->state().last_load_bytes());
    if (unusable.empty()) {
      log::info("resumed from {} at step {}{}", path, start_step, read);
    } else {
      log::info("resumed from {} at step {}, the newest checkpoint that loads (not: {}){}", path,
                start_step, fmt::join(unusable, ", "), read);
    }
    return;
  }
  throw comm::AgreedError(
      fmt::format("--resume: no checkpoint in {} can be loaded (tried {}); move them away to "
                  "start afresh",
                  config.checkpoint.dir, fmt::join(unusable, ", ")),
      kExitInput, 0);
}

// A checkpoint of another model cannot continue this run (require_same_model); other settings may
// differ, and this run's values apply (the log says which).
void Trainer::Impl::check_resumable(const std::string& path, const io::CheckpointMeta& meta) const {
  const Config& config = request.config;
  const Config saved = require_same_model(path, meta.config, config,
                                          "resume with the checkpoint's [model] settings");
  std::vector<std::string> changed;
  for (const auto& d : Config::differences(saved, config, "train"))
    changed.push_back(fmt::format("{} = {} (checkpoint: {})", d.key, d.b, d.a));
  if (!changed.empty())
    log::info("resuming with this run's settings where they differ from the checkpoint's: {}",
              fmt::join(changed, ", "));
}

io::MetricsWriter Trainer::Impl::open_metrics() const {
  const Config& config = request.config;
  if (rank != 0 || config.log.metrics.empty()) return {};
  return io::MetricsWriter(config.log.metrics, request.resume && start_step > 0);
}

// The step loop: feed, execute, reduce and guard, optimizer, metrics, validation, checkpoint,
// signals. Each step's parts live in their own files; this only orders them.
void Trainer::Impl::run() {
  const Config& config = request.config;
  comm::MpiTransport transport(plan.schedule, plan.topology, *comms, wait_policy,
                               compute->stages().message_floats(), compute->sum_factory());
  Executor executor(plan.schedule, plan.program, plan.topology.worker, compute->stages(),
                    transport);
  TraceCollector trace(world, config.log.trace);
  io::MetricsWriter metrics;
  comm::all_or_none(world, [&] { metrics = open_metrics(); });
  StepReport report(plan, cores, std::move(metrics), predicted_ms, start_step);
  NonfiniteGuard guard(config.train, skipped_steps);
  const StopSignals signals;
  Validation* const validation = compute->validation();

  const int steps = config.train.steps;
  std::int64_t step = start_step;
  const Stopwatch run_clock;
  if (step >= steps) {
    log::info(
        "nothing to train: the run starts at step {} and train.steps = {} (raise --steps "
        "to train on)",
        step, steps);
  }
  try {
    if (validation && step < steps) validation->before_training(step);
    // Each step's time is its whole cycle (step_cycle.hpp); validation and saves are left out.
    StepCycle step_cycle;
    for (; step < steps; ++step) {
      hang_hook.maybe_hang(rank, step + 1, false);
      // A lost host or link leaves ranks in blocking collectives no wait watches: the step as a
      // whole is bounded too (validation and the save below are not part of it).
      std::optional<comm::Deadline> step_bound;
      step_bound.emplace(watchdog->step_limit_s(),
                         [&, step] { return watchdog->step_expired(step + 1, rank); });
      // Feed and execute.
      watchdog->phase("the pipeline (its sends, receives and gradient allreduces)");
      const std::int64_t cursor = resume_cursor + (step - start_step) * plan.global_batch();
      const auto& inputs = feed->load(cursor);
      StageCompute& stages = compute->stages();
      stages.zero_grad();
      stages.reset_peak_activation_bytes();
      if (step + 1 < steps) feed->prefetch(cursor + plan.global_batch());  // while this computes
      const IterationResult r =
          executor.run(step, inputs, plan.loss_scale(), trace.events(), trace.origin_s());
      feed->wait();  // before any other HDF5 call (validation, a save)
      // Reduce, guard, optimizer.
      const double lr = lr_schedule.at(static_cast<int>(step));
      // Every rank arrives in a watched wait, which answers the probes of a stuck peer, before
      // the reductions (watched waits too).
      comm::barrier(world, wait_policy, [&, step] {
        return fmt::format("the barrier before the reductions of step {}{}", step + 1,
                           comm::describe_silent_peers(world));
      });
      watchdog->phase("the reduction of the step's loss and gradient norm over all ranks");
      const LossAndNorm v =
          reduce_loss_and_norm(world, r, compute->local_grad_squares(), wait_policy, [&, step] {
            return fmt::format("the reduction of step {}'s loss and gradient norm{}", step + 1,
                               comm::describe_silent_peers(world));
          });
      const NonfiniteGuard::Verdict verdict = guard.judge(v);
      // AdamW counts the updates made: skipped steps do not advance its bias correction.
      if (checkpointing) checkpointing->before_update();  // a save's snapshot is taken
      if (verdict.finite)
        compute->optimizer_step(static_cast<int>(step - guard.skipped_steps()), lr,
                                optim::clip_scale(v.grad_norm, config.train.grad_clip));
      watchdog->phase("the reduction of the step's timings over all ranks");
      const double step_s = step_cycle.measure();
      const StepStats s =
          reduce_step(world, r, step_s, stages.peak_activation_bytes(), signals.received(),
                      wait_policy, [&, step] {
                        return fmt::format("the reduction of step {}'s timings{}", step + 1,
                                           comm::describe_silent_peers(world));
                      });
      step_bound.reset();
      // parallel.shard_optimizer: each rank updated its shard; the all-gathers of the weights
      // overlap what comes before each stage's next forward, which waits for its own. They start
      // after the timings' reduction: started before it, they held its small messages behind
      // theirs (a connection sends in turn), and so every rank until all its gathers had ended.
      if (verdict.finite) transport.start_gathers();
      watchdog->step_done(s.iter_s);
      losses.push_back(v.loss);
      // Metrics and validation.
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
      m.skipped = verdict.skip;
      m.skipped_steps = guard.skipped_steps();
      if (validation && validation->due(step)) transport.wait_gathers();  // whole weights
      const Stopwatch validating;
      if (validation && verdict.finite) m.val_loss = validation->after_step(step);
      report.step(m, s, verdict.finite);
      if (m.val_loss) validation->print_sample(fmt::format("after step {}", step + 1));
      if (m.val_loss) step_cycle.exclude(validating.seconds());
      if (!verdict.finite) {
        guard.enforce(
            step, v, plan.schedule.stages,
            !std::isfinite(v.grad_norm) ? compute->nonfinite_grad_stages() : std::vector<int>{},
            checkpointing
                ? fmt::format("; {}/latest names the last good checkpoint", config.checkpoint.dir)
                : "");
      }
      // Checkpoint and signals.
      const bool stop_here = request.stop_after > 0 && step + 1 - start_step >= request.stop_after;
      const bool last_save = s.stop() || stop_here || step + 1 == steps;
      if (checkpointing) checkpointing->poll();  // a background save that has been written
      if (checkpointing && checkpointing->due(step, last_save, verdict.skip)) {
        io::CheckpointMeta meta{step + 1, config.train.seed, cursor + plan.global_batch(),
                                config.to_toml()};
        meta.skipped_steps = guard.skipped_steps();
        transport.wait_gathers();  // a checkpoint holds the whole weights
        const Stopwatch saving;
        checkpointing->save(compute->state(), meta, last_save);
        step_cycle.exclude(saving.seconds());
      }
      if (s.stop() || stop_here) {
        log::info("stopping after step {}{}{}", step + 1,
                  s.stop() ? " on " + signal_name(s.stop_signal)
                           : fmt::format(" (--stop-after {})", request.stop_after),
                  checkpointing ? "" : "; no checkpoint saved: the run has no --save-dir");
        ++step;
        break;
      }
    }
    transport.wait_gathers();  // the run ends with whole weights
    trace.write();
  } catch (const comm::AgreedError&) {
    throw;  // every rank leaves together (a failed save), with one message
  } catch (const DivergedError& e) {
    // Every rank reached the same verdict in the same step: leave together, without an abort.
    if (checkpointing) checkpointing->finish_save_in_flight();  // of a good step
    throw comm::AgreedError(e.what(), exit_status(e), rank);
  } catch (const std::exception& e) {
    // Other ranks may be inside a collective or waiting for this rank's messages: end them all.
    comm::abort_job(e.what(), exit_status(e));
  }
  report.done(step - start_step, run_clock.seconds(), schedule_bubble_ratio);
  if (feed->needs_data() && step > start_step)
    log::info(
        "sample reads: the training waited {:.1f} ms per step for them on rank 0 "
        "(data.prefetch = {})",
        1e3 * feed->waited_seconds() / static_cast<double>(step - start_step),
        config.data.prefetch);
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
  return impl_->compute->host_tensor(name);
}

}  // namespace chimera::runtime
