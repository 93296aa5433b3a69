#include "chimera/schedule/schedule_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/core/files.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/torch_csv.hpp"
#include "chimera/schedule/verify.hpp"

namespace chimera::schedule {

Schedule read_schedule_file(const std::string& path, ScheduleFileFormat format) {
  require_not_a_directory(path, "a schedule file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("schedule file '{}': cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  const bool csv = format == ScheduleFileFormat::TorchCsv ||
                   (format == ScheduleFileFormat::ByExtension && path.size() >= 4 &&
                    path.compare(path.size() - 4, 4, ".csv") == 0);
  Schedule s;
  try {
    s = csv ? schedule_from_torch_csv(text.str()) : schedule_from_json(text.str());
  } catch (const InputError& e) {
    throw InputError(fmt::format("schedule file '{}': {}", path, e.what()));
  }
  const VerifyResult result = check(s);
  if (!result.ok) {
    throw InputError(fmt::format("schedule file '{}' (D={}, N={}): {}", path, s.workers,
                                 s.schedule_micro_batches, result.problem));
  }
  return s;
}

}  // namespace chimera::schedule
