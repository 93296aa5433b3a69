// `chimera schedule`: Generate, verify, simulate and print pipeline schedules.
#include "chimera/core/error.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_schedule_command(CLI::App& app) {
  app.add_subcommand("schedule", "Generate, verify, simulate and print pipeline schedules");
  return []() -> int { throw Error("`chimera schedule` is not built yet"); };
}

}  // namespace chimera::cli
