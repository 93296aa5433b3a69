// `chimera inspect`: Describe a dataset, checkpoint, schedule JSON or trace.
#include "chimera/core/error.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_inspect_command(CLI::App& app) {
  app.add_subcommand("inspect", "Describe a dataset, checkpoint, schedule JSON or trace");
  return []() -> int { throw Error("`chimera inspect` is not built yet"); };
}

}  // namespace chimera::cli
