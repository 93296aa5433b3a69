#pragma once
// The one home of the configuration's rules (DESIGN §2): every rule on a Config's values alone,
// ranges and rules between keys. `chimera train` runs check_config at setup on every rank, inside
// the agreement (comm::all_or_none), before anything is built from the config. Non-finite numbers
// never get this far: Config refuses them as the keys are read. Rules that need more than the
// values live where that more is made: the scheme settings' table (parallel_settings.hpp, checked
// by make_schedule), micro_batch_size against the schedule's split and the ranks against the
// schedule (RunPlan::make), the files named (their readers and writers).
#include "chimera/core/config.hpp"

namespace chimera {

// An InputError naming the key, its `chimera train` flag where it has one, and what is expected.
void check_config(const Config& config);

// The optimizer's part of check_config (train.lr, min_lr, warmup_steps, steps, beta1, beta2,
// eps, weight_decay), for the commands that build an optimizer without training.
void check_optimizer_config(const TrainConfig& train);

}  // namespace chimera
