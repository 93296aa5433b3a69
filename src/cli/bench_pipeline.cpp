// `chimera bench pipeline`: Run emulated schedules and compare with the simulator.
#include "bench_commands.hpp"
#include "chimera/core/error.hpp"

namespace chimera::cli {

BenchEntries add_bench_pipeline(CLI::App& bench) {
  auto* sub =
      bench.add_subcommand("pipeline", "Run emulated schedules and compare with the simulator");
  return {{sub, []() -> int { throw Error("`chimera bench pipeline` is not built yet"); }}};
}

}  // namespace chimera::cli
