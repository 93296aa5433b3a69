// `chimera plan`: Pick the parallel configuration with the performance model.
#include "chimera/core/error.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_plan_command(CLI::App& app) {
  app.add_subcommand("plan", "Pick the parallel configuration with the performance model");
  return []() -> int { throw Error("`chimera plan` is not built yet"); };
}

}  // namespace chimera::cli
