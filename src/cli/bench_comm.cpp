// `chimera bench p2p`: Measure point-to-point latency and bandwidth.
#include "bench_commands.hpp"
#include "chimera/core/error.hpp"

namespace chimera::cli {

BenchEntries add_bench_comm(CLI::App& bench) {
  auto* sub = bench.add_subcommand("p2p", "Measure point-to-point latency and bandwidth");
  return {{sub, []() -> int { throw Error("`chimera bench p2p` is not built yet"); }}};
}

}  // namespace chimera::cli
