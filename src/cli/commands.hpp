#pragma once
// One file per subcommand; each adds its CLI11 subcommand and returns the function that runs it.
#include <CLI/CLI.hpp>
#include <functional>

namespace chimera::cli {

using Run = std::function<int()>;

Run add_schedule_command(CLI::App& app);
Run add_train_command(CLI::App& app);
Run add_prep_command(CLI::App& app);
Run add_plan_command(CLI::App& app);
Run add_inspect_command(CLI::App& app);
Run add_bench_command(CLI::App& app);
Run add_import_hf_command(CLI::App& app);
Run add_export_hf_command(CLI::App& app);
Run add_sample_command(CLI::App& app);

}  // namespace chimera::cli
