#pragma once
// Checks of configuration values that have the right type but no use in any run.
#include "chimera/core/config.hpp"

namespace chimera {

// A negative interval or clip, validation of no batches: an InputError naming the key, its
// `chimera train` flag where it has one, and what is expected. Non-finite numbers never get
// this far: Config refuses them as the keys are read.
void check_config_values(const Config& config);

}  // namespace chimera
