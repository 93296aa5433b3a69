#include <fmt/ranges.h>

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/schedule_file.hpp"
#include "chimera/schedule/verify.hpp"

namespace chimera::schedule {

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> names = {"gpipe",       "1f1b",    "gems",
                                                 "interleaved", "chimera", "zb-h1",
                                                 "chimera-zb",  "zb-v",    "dualpipev"};
  return names;
}

namespace {

constexpr std::string_view kFilePrefix = "file:";

// Options that belong to another scheme must be left at their defaults, so a typo in a config
// never silently runs something else.
void require_no_variant(const ScheduleRequest& r) {
  CHIMERA_REQUIRE(r.variant.empty() || r.variant == "direct",
                  "variant '{}' applies to chimera only (scheme is {})", r.variant, r.scheme);
}
void require_pipes(const ScheduleRequest& r, int own) {
  CHIMERA_REQUIRE(r.pipes == 0 || r.pipes == own,
                  "pipes = {} applies to chimera only ({} runs {} pipe{})", r.pipes, r.scheme, own,
                  own == 1 ? "" : "s");
}
void require_no_virtual(const ScheduleRequest& r) {
  CHIMERA_REQUIRE(r.virtual_stages == 0 || r.virtual_stages == 1,
                  "virtual = {} applies to interleaved only (scheme is {})", r.virtual_stages,
                  r.scheme);
}

// "file:PATH": the schedule in PATH (schedule_file.hpp), run as it is. D and N, where given,
// must be the file's: the run's ranks and batches are laid out from them.
Schedule from_file(const ScheduleRequest& r) {
  const std::string path = r.scheme.substr(kFilePrefix.size());
  CHIMERA_REQUIRE(!path.empty(),
                  "scheme 'file:' names no file: use file:PATH (a schedule JSON, "
                  "or a torch CSV ending in .csv)");
  Schedule s = read_schedule_file(path);
  require_no_variant(r);
  require_pipes(r, s.pipes());
  require_no_virtual(r);
  CHIMERA_REQUIRE(r.stages == 0 || r.stages == s.workers,
                  "schedule file '{}' has D = {} workers, the run has D = {}", path, s.workers,
                  r.stages);
  const int N = s.micro_batches / s.mb_split;
  CHIMERA_REQUIRE(r.micro_batches == 0 || r.micro_batches == N,
                  "schedule file '{}' has N = {} micro-batches, the run has N = {}", path, N,
                  r.micro_batches);
  return s;
}

Schedule generate(const ScheduleRequest& r) {
  CHIMERA_REQUIRE(r.max_in_flight == 0 || r.scheme == "chimera-zb",
                  "max_in_flight = {} applies to chimera-zb only (scheme is {})", r.max_in_flight,
                  r.scheme);
  if (r.scheme.starts_with(kFilePrefix)) return from_file(r);
  const int D = r.stages;
  const int N = r.micro_batches;
  if (r.scheme == "chimera") {
    require_no_virtual(r);
    return chimera(D, N, r.variant.empty() ? "direct" : r.variant, r.pipes == 0 ? 2 : r.pipes);
  }
  require_no_variant(r);
  if (r.scheme == "chimera-zb") {
    require_pipes(r, 2);
    require_no_virtual(r);
    return chimera_zb(D, N, r.max_in_flight);
  }
  if (r.scheme == "interleaved") {
    require_pipes(r, 1);
    return interleaved(D, N, r.virtual_stages == 0 ? 2 : r.virtual_stages);
  }
  require_no_virtual(r);
  if (r.scheme == "gems") {
    require_pipes(r, 2);
    return gems(D, N);
  }
  require_pipes(r, 1);
  if (r.scheme == "gpipe") return gpipe(D, N);
  if (r.scheme == "1f1b") return one_f_one_b(D, N);
  if (r.scheme == "zb-h1") return zb_h1(D, N);
  if (r.scheme == "zb-v") return zb_v(D, N);
  if (r.scheme == "dualpipev") return dualpipev(D, N);
  const std::string near = closest_match(r.scheme, scheme_names());
  throw InputError(fmt::format("unknown scheme '{}': use one of {} or file:PATH{}", r.scheme,
                               fmt::join(scheme_names(), ", "),
                               near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
}

}  // namespace

Schedule make_schedule(const ScheduleRequest& request) {
  Schedule schedule = generate(request);
  verify(schedule);  // a generator bug stops here, never in a run
  return schedule;
}

}  // namespace chimera::schedule
