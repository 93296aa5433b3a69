#include <fmt/format.h>

#include <algorithm>

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/schedule_file.hpp"
#include "chimera/schedule/verify.hpp"

namespace chimera::schedule {

namespace {

constexpr std::string_view kFilePrefix = "file:";

// A schedule file runs as many pipelines as it holds: `pipes`, where given, must be that many.
void require_pipes(const ScheduleRequest& r, int own) {
  CHIMERA_REQUIRE(r.pipes == 0 || r.pipes == own,
                  "pipes = {} applies to chimera only ({} runs {} pipe{})", r.pipes, r.scheme, own,
                  own == 1 ? "" : "s");
}

// "file:PATH": the schedule in PATH (schedule_file.hpp), run as it is. D and N, where given,
// must be the file's: the run's ranks and batches are laid out from them.
Schedule from_file(const ScheduleRequest& r) {
  const std::string path = r.scheme.substr(kFilePrefix.size());
  CHIMERA_REQUIRE(!path.empty(),
                  "scheme 'file:' names no file: use file:PATH (a schedule JSON, "
                  "or a torch CSV ending in .csv)");
  Schedule s = read_schedule_file(path);
  require_pipes(r, s.pipes());
  CHIMERA_REQUIRE(r.stages == 0 || r.stages == s.workers,
                  "schedule file '{}' has D = {} workers, the run has D = {}", path, s.workers,
                  r.stages);
  const int N = s.configured_micro_batches();
  CHIMERA_REQUIRE(r.micro_batches == 0 || r.micro_batches == N,
                  "schedule file '{}' has N = {} micro-batches, the run has N = {}", path, N,
                  r.micro_batches);
  return s;
}

Schedule generate(const ScheduleRequest& r) {
  const bool file = r.scheme.starts_with(kFilePrefix);
  const auto& names = scheme_names();
  if (!file && std::find(names.begin(), names.end(), r.scheme) == names.end()) {
    const std::string near = closest_match(r.scheme, names);
    throw InputError(fmt::format("unknown scheme '{}': use one of {} or file:PATH{}", r.scheme,
                                 scheme_list(),
                                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
  }
  check_scheme_settings({r.scheme, r.variant, r.pipes, r.virtual_stages, r.max_in_flight});
  if (file) return from_file(r);
  const int D = r.stages;
  const int N = r.micro_batches;
  if (r.scheme == "chimera")
    return chimera(D, N, r.variant.empty() ? "direct" : r.variant, r.pipes == 0 ? 2 : r.pipes);
  if (r.scheme == "chimera-zb") return chimera_zb(D, N, r.max_in_flight);
  if (r.scheme == "interleaved")
    return interleaved(D, N, r.virtual_stages == 0 ? 2 : r.virtual_stages);
  if (r.scheme == "gems") return gems(D, N);
  if (r.scheme == "gpipe") return gpipe(D, N);
  if (r.scheme == "1f1b") return one_f_one_b(D, N);
  if (r.scheme == "zb-h1") return zb_h1(D, N);
  if (r.scheme == "zb-v") return zb_v(D, N);
  if (r.scheme == "bitpipe") return bitpipe(D, N);
  if (r.scheme == "bitpipe-zb") return bitpipe_zb(D, N);
  if (r.scheme == "v-half") return v_half(D, N);
  if (r.scheme == "v-min") return v_min(D, N);
  return dualpipev(D, N);
}

}  // namespace

Schedule make_schedule(const ScheduleRequest& request) {
  Schedule schedule = generate(request);
  verify(schedule);  // a generator bug stops here, never in a run
  return schedule;
}

}  // namespace chimera::schedule
