#include "chimera/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "chimera/core/error.hpp"

namespace chimera::optim {

LrSchedule LrSchedule::from(const TrainConfig& train) {
  return {train.lr, train.min_lr, train.warmup_steps, train.steps};
}

double LrSchedule::at(int step) const {
  if (step < warmup_steps) return lr * (step + 1) / warmup_steps;
  const double span = std::max(1, total_steps - 1 - warmup_steps);
  const double r = std::min(1.0, (step - warmup_steps) / span);
  return min_lr + (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * r)) / 2.0;
}

}  // namespace chimera::optim
