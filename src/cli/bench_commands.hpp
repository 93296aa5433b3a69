#pragma once
// The `chimera bench` family: each adder registers its sub-subcommands under `bench`.
#include <utility>
#include <vector>

#include "commands.hpp"

namespace chimera::cli {

using BenchEntries = std::vector<std::pair<CLI::App*, Run>>;

BenchEntries add_bench_model(CLI::App& bench);  // bench model
BenchEntries add_bench_comm(CLI::App& bench);   // bench p2p, bench allreduce
BenchEntries add_bench_sums(CLI::App& bench);   // bench sums

}  // namespace chimera::cli
