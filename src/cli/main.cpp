// `chimera`: one binary, one subcommand per job (docs/DESIGN.md §6).
#include <chrono>
#include <exception>
#include <map>
#include <thread>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Chimera: GPT-2 training with bidirectional pipelines (Li & Hoefler, SC'21) over MPI.\n"
      "Run `chimera <subcommand> --help` for the flags of each subcommand."};
  app.name("chimera");
  app.require_subcommand(1);
  app.set_version_flag("--version", "chimera 0.1.0");

  std::map<CLI::App*, chimera::cli::Run> runs;
  auto add = [&](chimera::cli::Run (*adder)(CLI::App&)) {
    const std::size_t before = app.get_subcommands({}).size();
    chimera::cli::Run run = adder(app);
    runs[app.get_subcommands({}).at(before)] = std::move(run);
  };
  add(chimera::cli::add_schedule_command);
  add(chimera::cli::add_train_command);
  add(chimera::cli::add_prep_command);
  add(chimera::cli::add_plan_command);
  add(chimera::cli::add_bench_command);
  add(chimera::cli::add_inspect_command);
  add(chimera::cli::add_import_hf_command);
  add(chimera::cli::add_export_hf_command);
  add(chimera::cli::add_sample_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Bad flags are bad input: one line, status 2. Launched on many ranks, rank 0 says it; the
    // others wait, because a launcher that sees one rank fail kills the rest, and it must not
    // kill rank 0 before its line is out. A rank still alive after the wait (its flags alone
    // were bad, or the launcher lets ranks finish) says it too, so the error is never silent.
    if (!chimera::log::is_root()) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      chimera::log::error("{} (see `chimera --help`)", e.what());
    } else {
      chimera::log::error_once("{} (see `chimera --help`)", e.what());
    }
    return 2;
  }

  for (auto& [sub, run] : runs) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const std::exception& e) {
      chimera::log::error("{}", e.what());
      return chimera::exit_status(e);
    }
  }
  return 2;
}
