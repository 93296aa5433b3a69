// `chimera prep`: Tokenize text files into HDF5 token datasets.
#include "chimera/core/error.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_prep_command(CLI::App& app) {
  app.add_subcommand("prep", "Tokenize text files into HDF5 token datasets");
  return []() -> int { throw Error("`chimera prep` is not built yet"); };
}

}  // namespace chimera::cli
