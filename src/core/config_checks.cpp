#include "chimera/core/config_checks.hpp"

#include "chimera/core/error.hpp"

namespace chimera {

void check_optimizer_config(const TrainConfig& train) {
  CHIMERA_REQUIRE(train.lr > 0.0, "train.lr = {} must be positive", train.lr);
  CHIMERA_REQUIRE(train.min_lr >= 0.0 && train.min_lr <= train.lr,
                  "train.min_lr = {} must be in [0, train.lr = {}]", train.min_lr, train.lr);
  CHIMERA_REQUIRE(train.warmup_steps >= 0, "train.warmup_steps = {} must not be negative",
                  train.warmup_steps);
  CHIMERA_REQUIRE(train.steps >= 1, "train.steps = {} must be at least 1", train.steps);
  CHIMERA_REQUIRE(train.beta1 >= 0.0 && train.beta1 < 1.0, "train.beta1 = {} must be in [0, 1)",
                  train.beta1);
  CHIMERA_REQUIRE(train.beta2 >= 0.0 && train.beta2 < 1.0, "train.beta2 = {} must be in [0, 1)",
                  train.beta2);
  CHIMERA_REQUIRE(train.eps > 0.0, "train.eps = {} must be positive", train.eps);
  CHIMERA_REQUIRE(train.weight_decay >= 0.0, "train.weight_decay = {} must not be negative",
                  train.weight_decay);
}

void check_config(const Config& config) {
  const ParallelConfig& parallel = config.parallel;
  const TrainConfig& train = config.train;
  const LogConfig& log = config.log;
  CHIMERA_REQUIRE(config.runtime.compute != ComputeMode::Emulate || !config.runtime.cost.empty(),
                  "--compute emulate needs the op costs: --cost F:B (milliseconds), e.g. 10:20");
  CHIMERA_REQUIRE(config.runtime.network.empty() || config.runtime.compute == ComputeMode::Emulate,
                  "runtime.network = '{}' prices the messages of the simulator's figure for "
                  "--compute emulate, and this run computes for real: add --compute emulate, or "
                  "drop runtime.network",
                  config.runtime.network);
  CHIMERA_REQUIRE(parallel.micro_batch_size >= 1,
                  "parallel.micro_batch_size = {}: must be at least 1", parallel.micro_batch_size);
  CHIMERA_REQUIRE(log.every >= 1, "log.every = {}: must be at least 1", log.every);
  CHIMERA_REQUIRE(train.eval_every >= 0,
                  "train.eval_every (--eval-every) = {}: must be >= 0 (0 = no validation)",
                  train.eval_every);
  CHIMERA_REQUIRE(train.eval_every == 0 || train.eval_batches >= 1,
                  "train.eval_batches = {}: must be at least 1 while validation is on "
                  "(train.eval_every = {})",
                  train.eval_batches, train.eval_every);
  CHIMERA_REQUIRE(train.grad_clip >= 0.0, "train.grad_clip = {}: must be >= 0 (0 = no clipping)",
                  train.grad_clip);
  CHIMERA_REQUIRE(config.checkpoint.every >= 0,
                  "checkpoint.every (--save-every) = {}: must be >= 0 (0 = only at the end)",
                  config.checkpoint.every);
  CHIMERA_REQUIRE(config.checkpoint.dir.empty() || config.checkpoint.keep >= 1,
                  "checkpoint.keep = {} must be at least 1", config.checkpoint.keep);
  CHIMERA_REQUIRE(log.sample_tokens >= 0, "log.sample_tokens = {} must be >= 0", log.sample_tokens);
  CHIMERA_REQUIRE(log.sample_tokens == 0 || train.eval_every > 0,
                  "log.sample_tokens = {} prints a sample with each validation loss: set "
                  "train.eval_every (--eval-every K) too",
                  log.sample_tokens);
  CHIMERA_REQUIRE(train.max_skipped_steps >= 1, "train.max_skipped_steps = {}: must be at least 1",
                  train.max_skipped_steps);
  CHIMERA_REQUIRE(config.checkpoint.save_timeout_s >= 0.0,
                  "checkpoint.save_timeout_s = {}: use 0 (no bound) or a number of seconds",
                  config.checkpoint.save_timeout_s);
  CHIMERA_REQUIRE(config.runtime.watchdog_s >= 0.0 || config.runtime.watchdog_s == kWatchdogAuto,
                  "runtime.watchdog_s = {}: use -1 (auto, the default), 0 (off) or a number of "
                  "seconds",
                  config.runtime.watchdog_s);
  check_optimizer_config(train);
}

}  // namespace chimera
