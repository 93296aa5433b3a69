#include "chimera/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "chimera/core/error.hpp"

namespace chimera::optim {

LrSchedule LrSchedule::from(const TrainConfig& train) {
  CHIMERA_REQUIRE(train.lr > 0.0, "train.lr = {} must be positive", train.lr);
  CHIMERA_REQUIRE(train.min_lr >= 0.0 && train.min_lr <= train.lr,
                  "train.min_lr = {} must be in [0, train.lr = {}]", train.min_lr, train.lr);
  CHIMERA_REQUIRE(train.warmup_steps >= 0, "train.warmup_steps = {} must not be negative",
                  train.warmup_steps);
  CHIMERA_REQUIRE(train.steps >= 1, "train.steps = {} must be at least 1", train.steps);
  return {train.lr, train.min_lr, train.warmup_steps, train.steps};
}

double LrSchedule::at(int step) const {
  if (step < warmup_steps) return lr * (step + 1) / warmup_steps;
  const double span = std::max(1, total_steps - 1 - warmup_steps);
  const double r = std::min(1.0, (step - warmup_steps) / span);
  return min_lr + (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * r)) / 2.0;
}

}  // namespace chimera::optim
