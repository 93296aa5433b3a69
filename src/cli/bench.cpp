// `chimera bench`: benchmarks that print figures (model step, p2p, allreduce, concurrent sums).
// Pipeline runs are timed by bench/pipeline_emulation.py, which launches `chimera train --compute
// emulate`.
#include <memory>

#include "bench_commands.hpp"
#include "commands.hpp"

namespace chimera::cli {

Run add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand(
      "bench", "Measure model steps, p2p, allreduce and concurrent gradient sums");
  bench->require_subcommand(1);
  auto runs = std::make_shared<std::vector<std::pair<CLI::App*, Run>>>();
  for (auto* adder : {add_bench_model, add_bench_comm, add_bench_sums}) {
    for (auto& entry : adder(*bench)) runs->push_back(std::move(entry));
  }
  return [runs]() -> int {
    for (auto& [sub, run] : *runs) {
      if (sub->parsed()) return run();
    }
    return 2;
  };
}

}  // namespace chimera::cli
