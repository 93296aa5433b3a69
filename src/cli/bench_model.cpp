// `chimera bench model`: Time full training steps of a GPT-2 stage.
#include "bench_commands.hpp"
#include "chimera/core/error.hpp"

namespace chimera::cli {

BenchEntries add_bench_model(CLI::App& bench) {
  auto* sub = bench.add_subcommand("model", "Time full training steps of a GPT-2 stage");
  return {{sub, []() -> int { throw Error("`chimera bench model` is not built yet"); }}};
}

}  // namespace chimera::cli
