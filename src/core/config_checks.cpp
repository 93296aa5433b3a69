#include "chimera/core/config_checks.hpp"

#include "chimera/core/error.hpp"

namespace chimera {

void check_config_values(const Config& config) {
  CHIMERA_REQUIRE(config.train.eval_every >= 0,
                  "train.eval_every (--eval-every) = {}: must be >= 0 (0 = no validation)",
                  config.train.eval_every);
  CHIMERA_REQUIRE(config.train.eval_every == 0 || config.train.eval_batches >= 1,
                  "train.eval_batches = {}: must be at least 1 while validation is on "
                  "(train.eval_every = {})",
                  config.train.eval_batches, config.train.eval_every);
  CHIMERA_REQUIRE(config.train.grad_clip >= 0.0,
                  "train.grad_clip = {}: must be >= 0 (0 = no clipping)", config.train.grad_clip);
  CHIMERA_REQUIRE(config.checkpoint.every >= 0,
                  "checkpoint.every (--save-every) = {}: must be >= 0 (0 = only at the end)",
                  config.checkpoint.every);
}

}  // namespace chimera
