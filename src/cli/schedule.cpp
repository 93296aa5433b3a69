// `chimera schedule`: generate, verify, simulate and print pipeline schedules (DESIGN §6).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/render.hpp"
#include "chimera/schedule/schedule_file.hpp"
#include "chimera/schedule/search.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/torch_csv.hpp"
#include "chimera/schedule/verify.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

struct ScheduleOptions {
  schedule::ScheduleRequest request{"chimera", 4, 0, "direct", 0, 0};
  std::string cost = "1:1";
  double allreduce = 0;   // time to move one stage's gradient once (Rabenseifner: 2(r-1)/r of it)
  int data_parallel = 1;  // W: replicas of the pipeline group
  std::string format = "grid";
  std::string from_csv;   // a PyTorch compute-only CSV to read instead of generating
  std::string semantics;  // eager | rendezvous: check deadlock freedom under it, print the verdict
  bool compare = false;
  bool search = false;       // search a schedule (search.hpp) instead of generating one
  double max_in_flight = 0;  // chimera-zb's knob, or --search's cap, in chunks (0 = 2D)
  double search_seconds = 20;
  std::uint64_t seed = 1;
};

// `--search`: the searched schedule, printed in --format; its summary (makespan, bound, gap,
// start, improvement) follows the grid, or goes to stderr so that json, csv and svg stay clean.
int run_search(const ScheduleOptions& o, int D, int N) {
  schedule::SearchOptions so;
  so.workers = D;
  so.micro_batches = N;
  so.costs = schedule::Costs::parse(o.cost);
  so.max_in_flight = o.max_in_flight;
  so.seconds = o.search_seconds;
  so.seed = o.seed;
  const schedule::SearchResult r = schedule::search_schedule(so);
  const std::string summary = schedule::search_summary(r);
  const schedule::Schedule& s = r.schedule;
  if (o.format == "json") {
    const schedule::Program program = schedule::lower(s);
    std::fputs(schedule::schedule_to_json(s, &program).c_str(), stdout);
  } else if (o.format == "torch-csv") {
    std::fputs(schedule::schedule_to_torch_csv(s).c_str(), stdout);
  } else {
    const schedule::SimResult result = schedule::simulate(s, so.costs);
    if (o.format == "grid") {
      std::fputs((schedule::render_grid(s, result, so.costs) + summary).c_str(), stdout);
      return 0;
    }
    const std::string text = o.format == "csv" ? schedule::render_csv(s, result)
                                               : schedule::render_svg(s, result, so.costs);
    std::fputs(text.c_str(), stdout);
  }
  std::fputs(summary.c_str(), stderr);
  return 0;
}

// `stages_given`, `micro_batches_given`: -D, -N were on the command line; otherwise D = 4 and
// N = D, or for a schedule file its own.
int run_schedule(const ScheduleOptions& o, bool stages_given, bool micro_batches_given) {
  schedule::ScheduleRequest request = o.request;
  const bool file = request.scheme.starts_with("file:");
  if (file && !stages_given) request.stages = 0;
  if (!micro_batches_given) request.micro_batches = file ? 0 : request.stages;
  if (o.search) return run_search(o, request.stages, request.micro_batches);
  CHIMERA_REQUIRE(o.max_in_flight == static_cast<int>(o.max_in_flight),
                  "--max-in-flight {}: chimera-zb counts whole chunk-activations", o.max_in_flight);
  request.max_in_flight = static_cast<int>(o.max_in_flight);
  if (o.compare) {
    std::fputs(schedule::render_comparison(request.stages, request.micro_batches,
                                           request.virtual_stages == 0 ? 2 : request.virtual_stages)
                   .c_str(),
               stdout);
    return 0;
  }
  schedule::Costs costs = schedule::Costs::parse(o.cost);
  CHIMERA_REQUIRE(o.allreduce >= 0 && o.allreduce <= 1e9,
                  "--allreduce {}: expected a time in [0, 1e9]", o.allreduce);
  CHIMERA_REQUIRE(o.data_parallel >= 1 && o.data_parallel <= 1 << 20,
                  "--data-parallel {}: expected W >= 1", o.data_parallel);
  // Only the allreduce uses bytes here (messages between stages are free), so beta = 1 makes
  // stage_grad_bytes the time to move one stage's gradient once.
  costs.beta = 1;
  costs.stage_grad_bytes = o.allreduce;
  costs.data_parallel = o.data_parallel;
  const schedule::Schedule s =
      o.from_csv.empty()
          ? schedule::make_schedule(request)
          : schedule::read_schedule_file(o.from_csv, schedule::ScheduleFileFormat::TorchCsv);
  if (!o.semantics.empty()) {
    const auto sem =
        o.semantics == "eager" ? schedule::Semantics::Eager : schedule::Semantics::Rendezvous;
    const schedule::VerifyResult r = schedule::check(s, sem);
    if (!r.ok) throw InputError(fmt::format("{} schedule: {}", s.scheme, r.problem));
    std::fputs(
        fmt::format("ok: the {} schedule (D={}, N={}) is complete and deadlock-free with "
                    "{} sends\n",
                    s.scheme, s.workers, s.schedule_micro_batches, schedule::semantics_name(sem))
            .c_str(),
        stdout);
    return 0;
  }
  if (o.format == "torch-csv") {
    std::fputs(schedule::schedule_to_torch_csv(s).c_str(), stdout);
    return 0;
  }
  if (o.format == "json") {
    const schedule::Program program = schedule::lower(s);
    std::fputs(schedule::schedule_to_json(s, &program).c_str(), stdout);
    return 0;
  }
  const schedule::SimResult result = schedule::simulate(s, costs);
  std::string text;
  if (o.format == "grid") text = schedule::render_grid(s, result, costs);
  if (o.format == "csv") text = schedule::render_csv(s, result);
  if (o.format == "svg") text = schedule::render_svg(s, result, costs);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

Run add_schedule_command(CLI::App& app) {
  auto options = std::make_shared<ScheduleOptions>();
  auto* sub = app.add_subcommand(
      "schedule",
      "Generate, verify, simulate and print a pipeline schedule.\n"
      "Every schedule is verified (complete, deadlock-free) before it is printed.\n"
      "Examples:\n"
      "  chimera schedule --scheme chimera -D 4 -N 4\n"
      "  chimera schedule --scheme chimera -D 8 -N 32 --variant halving --cost 1:2\n"
      "  chimera schedule -D 8 -N 16 --compare\n"
      "  chimera schedule --scheme 1f1b -D 4 -N 8 --format svg > 1f1b.svg\n"
      "  chimera schedule --scheme zb-h1 -D 4 -N 8 --format torch-csv > zb.csv\n"
      "  chimera schedule --from-csv zb.csv --format grid\n"
      "  chimera schedule --search -D 8 -N 16 --cost 1:2:1 --max-in-flight 8 --format json");
  auto& r = options->request;
  auto* scheme = sub->add_option(
      "--scheme", r.scheme,
      scheme_list() +
          " (default chimera), or file:PATH: a schedule JSON (DESIGN §3) or a torch CSV (.csv), "
          "verified; -D and -N, if given, must be the file's");
  auto* stages = sub->add_option("-D,--stages", r.stages,
                                 "D: pipeline stages = workers of one group (default 4)");
  auto* micro_batches = sub->add_option("-N,--micro-batches", r.micro_batches,
                                        "N: micro-batches per iteration (default D)");
  auto* variant = sub->add_option(
      "--variant", r.variant,
      "chimera: direct (N = kD, units concatenated), doubling (a forward op covers "
      "two micro-batches) or halving (half micro-batches; forwards cover two halves). "
      "Default direct");
  auto* pipes = sub->add_option(
      "--pipes", r.pipes,
      "chimera: number of pipelines 2f (f down + f up, f must divide D/2). Default 2");
  auto* virtual_stages = sub->add_option(
      "--virtual", r.virtual_stages, "interleaved: v model stages per worker, v >= 2 (default 2)");
  auto* max_in_flight = sub->add_option(
      "--max-in-flight", options->max_in_flight,
      "the most chunk-activations a worker holds at once: one chunk is a micro-batch's "
      "activations through 1/(2D) of the model, as the V schedules count them, so 1F1B's first "
      "worker holds 2D and the grid's peak activations (1/D each) are half the count (default "
      "2D): chimera-zb's memory knob (at least Chimera's own peak, 2D), or --search's cap");
  sub->add_option("--cost", options->cost,
                  "op costs F:B or F:B:W for the simulation (grid, csv, svg), per micro-batch "
                  "through 1/D of the model. A doubled forward costs 2F, a halved backward B/2; "
                  "zb-h1, zb-v, dualpipev, chimera-zb, bitpipe-zb, v-half and v-min split B into "
                  "I = B - W and W (I = W = B/2 without W). Default 1:1");
  sub->add_option("--allreduce", options->allreduce,
                  "time to move one stage's gradient once, in --cost units (default 0: no "
                  "allreduce). A stage's allreduce over r replicas takes 2(r-1)/r of it "
                  "(Rabenseifner); it starts after the last backward of that stage");
  sub->add_option("--data-parallel", options->data_parallel,
                  "W: data-parallel replicas of the pipeline group; a stage's allreduce runs "
                  "over W x (workers holding it) replicas (default 1)");
  sub->add_option("--format", options->format,
                  "grid (paper-style worker x time table with statistics), json (the schedule, "
                  "DESIGN §3), csv (one row per worker), svg (Gantt chart), torch-csv (PyTorch's "
                  "compute-only schedule CSV: one row per rank, actions like 0F0, 1B2; only "
                  "schedules with each stage on one worker). Default grid")
      ->check(CLI::IsMember({"grid", "json", "csv", "svg", "torch-csv"}));
  auto* from_csv =
      sub->add_option(
             "--from-csv", options->from_csv,
             "read the schedule from PyTorch's compute-only CSV (torch.distributed."
             "pipelining _dump_csv) instead of generating it; it is verified, then printed "
             "in --format")
          ->excludes(scheme)
          ->excludes(stages)
          ->excludes(micro_batches)
          ->excludes(variant)
          ->excludes(pipes)
          ->excludes(virtual_stages)
          ->excludes(max_in_flight);
  sub->add_option("--semantics", options->semantics,
                  "check deadlock freedom with eager sends (a send completes without its "
                  "receive: the runtime's) or rendezvous sends (a send completes only once the "
                  "receiver has posted the receive) and print ok, or the shortest cyclic wait "
                  "(exit status 2), instead of the schedule")
      ->check(CLI::IsMember({"eager", "rendezvous"}));
  sub->add_flag("--compare", options->compare,
                "print one table over all schemes for -D and -N instead: makespan and bubble "
                "ratio with F = B and with B = 2F, peak activations, weight copies")
      ->excludes(from_csv);
  auto* search =
      sub->add_flag("--search", options->search,
                    "search a schedule for -D, -N, --cost and --max-in-flight: start from "
                    "every built-in within the cap, list-schedule their placements with the "
                    "backward split into I and W, improve by local search; print it in "
                    "--format with makespan, bubble ratio, lower bound, gap and the built-in "
                    "it started from (scheme \"search\"; the JSON runs as file:PATH)")
          ->excludes(from_csv)
          ->excludes(scheme)
          ->excludes(variant)
          ->excludes(pipes)
          ->excludes(virtual_stages);
  sub->add_option("--search-seconds", options->search_seconds,
                  "--search: effort, in seconds of this machine's speed (counted in replayed "
                  "ops, so a seed always gives the same schedule; default 20)")
      ->needs(search);
  sub->add_option("--seed", options->seed, "--search: random seed (default 1)")->needs(search);
  return [options, stages, micro_batches]() {
    return run_schedule(*options, stages->count() > 0, micro_batches->count() > 0);
  };
}

}  // namespace chimera::cli
