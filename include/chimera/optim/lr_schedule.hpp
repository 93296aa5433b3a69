#pragma once
// Learning rate as a pure function of the step s = 0, 1, ... (W = warmup_steps, S = steps):
//   s < W:   lr * (s + 1) / W                                       (linear warmup)
//   s >= W:  min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2,        (cosine decay)
//            r = min(1, (s - W) / max(1, S - 1 - W))
// so the first step after warmup uses lr and step S - 1 uses min_lr. analysis/gpt2_torch.py has
// the same function for the PyTorch fixtures.
#include "chimera/core/config.hpp"

namespace chimera::optim {

struct LrSchedule {
  double lr = 6e-4;
  double min_lr = 6e-5;
  int warmup_steps = 0;
  int total_steps = 1;

  // train.lr, min_lr, warmup_steps, steps, as check_optimizer_config (config_checks.hpp) passed.
  static LrSchedule from(const TrainConfig& train);
  double at(int step) const;
};

}  // namespace chimera::optim
