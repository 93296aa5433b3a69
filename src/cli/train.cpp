// `chimera train`: Train GPT-2 with a pipeline schedule over MPI.
#include "chimera/core/error.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_train_command(CLI::App& app) {
  app.add_subcommand("train", "Train GPT-2 with a pipeline schedule over MPI");
  return []() -> int { throw Error("`chimera train` is not built yet"); };
}

}  // namespace chimera::cli
