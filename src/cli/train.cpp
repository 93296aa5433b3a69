// `chimera train`: train GPT-2 with a pipeline schedule over MPI (DESIGN §6).
#include <memory>
#include <optional>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/runtime/trainer.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

struct TrainFlags {
  std::string config_path;
  std::vector<std::string> sets;
  std::optional<int> steps;
  std::optional<std::string> metrics;
  std::optional<std::string> trace;
  std::optional<std::string> compute;
  std::optional<std::string> cost;
  std::optional<std::string> network;
  std::optional<std::string> save_dir;
  std::optional<int> save_every;
  std::optional<int> eval_every;
  bool resume = false;
  std::string init;
  int stop_after = 0;
  bool help_config = false;
};

// The configuration file, then every --set in order, then the dedicated flags.
Config build_config(const TrainFlags& f) {
  Config c = f.config_path.empty() ? Config{} : Config::from_file(f.config_path);
  for (const auto& s : f.sets) c.set(s);
  if (f.steps) c.train.steps = *f.steps;
  if (f.metrics) c.log.metrics = *f.metrics;
  if (f.trace) c.log.trace = *f.trace;
  if (f.compute) c.runtime.compute = parse_enum<ComputeMode>(*f.compute);
  if (f.cost) c.runtime.cost = *f.cost;
  if (f.network) c.runtime.network = *f.network;
  if (f.save_dir) c.checkpoint.dir = *f.save_dir;
  if (f.save_every) c.checkpoint.every = *f.save_every;
  if (f.eval_every) c.train.eval_every = *f.eval_every;
  // A flag that changes nothing in this mode is refused, as --compute emulate refuses the flags
  // of real compute: a user who passed it expects something of it. The config key may stay set.
  CHIMERA_REQUIRE(!f.cost || c.runtime.compute == ComputeMode::Emulate,
                  "--cost {} sets the op costs of --compute emulate, and this run computes for "
                  "real (runtime.compute = {}): add --compute emulate, or drop --cost",
                  *f.cost, to_string(c.runtime.compute));
  return c;
}

}  // namespace

Run add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train",
      "Train GPT-2 with a pipeline schedule over MPI. Launch W*D ranks (mpirun -np, srun): D from "
      "parallel.stages, W (data-parallel replicas) = ranks / D.\n"
      "Example: mpirun -np 4 chimera train --config inputs/demo.toml\n"
      "Exit status: 0 done (or stopped by SIGTERM/SIGUSR1 after a checkpoint); 1 internal error "
      "or a checkpoint that could not be saved; 2 bad input; 3 training diverged (a NaN/Inf loss "
      "or gradient norm, see train.on_nonfinite; nothing of it is saved)");
  auto f = std::make_shared<TrainFlags>();
  cmd->add_option("--config", f->config_path,
                  "TOML run configuration ([model] [parallel] [data] [train] [checkpoint] [log] "
                  "[runtime]); defaults apply to keys it omits");
  cmd->add_option("--set", f->sets,
                  "Override one config key, section.key=value (repeatable), e.g. --set "
                  "parallel.scheme=1f1b --set train.lr=3e-4. See --help-config for every key");
  cmd->add_option("--steps", f->steps, "Optimizer steps to run (train.steps)");
  cmd->add_option(
      "--metrics", f->metrics,
      "Write one JSON object per step to FILE (log.metrics): step, loss, lr, "
      "grad_norm, iter_ms, tokens_per_s, bubble_ratio, core_wait_ratio, peak_act_bytes, skipped, "
      "skipped_steps[, val_loss]");
  cmd->add_option("--trace", f->trace,
                  "Write a Chrome trace of every rank to FILE (log.trace), for Perfetto and "
                  "`analysis/plot.py gantt`");
  cmd->add_option("--compute", f->compute,
                  "real: run GPT-2 (default); emulate: replace stage kernels by timed waits of "
                  "--cost while messages and allreduces stay real (runtime.compute)");
  cmd->add_option("--cost", f->cost,
                  "Emulated op costs F:B[:W] in milliseconds per micro-batch and 1/D of the model "
                  "(runtime.cost); W is the weight-gradient part of B (default B/2). Only with "
                  "--compute emulate");
  cmd->add_option(
      "--network", f->network,
      "The network ALPHA,BETA[,binomial] of `chimera plan --network` (runtime.network): "
      "the simulator's figure of each step, (sim ...), then includes its activation "
      "messages and gradient sums, with the launcher's ranks per node sharing a link, "
      "and equals `chimera plan --predict` for this layout. Only with --compute emulate");
  cmd->add_option("--save-dir", f->save_dir,
                  "Checkpoint directory (checkpoint.dir): a checkpoint at the end, every "
                  "--save-every steps, and when SIGTERM/SIGUSR1 stops the run");
  cmd->add_option("--save-every", f->save_every,
                  "Save every K steps (checkpoint.every; 0 = only at the end, K >= 0)");
  cmd->add_flag("--resume", f->resume,
                "Continue from the latest checkpoint in --save-dir (starts from step 0 if there "
                "is none yet, so a requeued job can always pass --resume)");
  cmd->add_option("--init", f->init,
                  "Start from the weights of this checkpoint, or of any HDF5 file of GPT-2 "
                  "tensors with Hugging Face names (step 0, fresh optimizer state); any D and W "
                  "can load it");
  cmd->add_option("--stop-after", f->stop_after,
                  "Run at most K steps in this invocation, then checkpoint and exit; the LR "
                  "schedule still spans train.steps (for chains of jobs shorter than the run). "
                  "Needs --save-dir; 0 = off (the default)");
  cmd->add_option("--eval-every", f->eval_every,
                  "Validation loss on data.val every K steps (train.eval_every; 0 = never, the "
                  "default; K >= 0), over train.eval_batches >= 1 batches");
  cmd->add_flag("--help-config", f->help_config, "List every config key with its default");

  return [f]() -> int {
    if (f->help_config) {
      log::info("Config keys (TOML section.key; override with --set section.key=value):\n{}",
                Config::describe_keys());
      return 0;
    }
    const comm::MpiSession mpi(nullptr, nullptr);
    try {
      runtime::TrainRequest request;
      comm::all_or_none(MPI_COMM_WORLD, [&] { request.config = build_config(*f); });
      comm::check_same_config(MPI_COMM_WORLD, request.config.hash());
      request.resume = f->resume;
      request.init = f->init;
      request.stop_after = f->stop_after;
      runtime::Trainer trainer(request, MPI_COMM_WORLD);
      trainer.run();
    } catch (const comm::AgreedError& e) {
      // Every rank has the same error; rank 0 says it once and all leave with its status.
      log::error_once("{}", e.what());
      return e.status();
    }
    return 0;
  };
}

}  // namespace chimera::cli
