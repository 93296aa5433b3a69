#pragma once
// A schedule read from a file instead of generated: the schedule JSON (json.hpp, DESIGN §3) or,
// for a name ending in ".csv", PyTorch's compute-only CSV (torch_csv.hpp).
#include <string>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

enum class ScheduleFileFormat {
  ByExtension,  // ".csv": torch CSV, anything else: JSON
  Json,
  TorchCsv,
};

// Reads, parses and verifies (verify.hpp) the schedule in `path`. An unreadable file, a parse
// error or a schedule the verifier rejects (incomplete, deadlocking) throws InputError: one line
// naming the file and the problem.
Schedule read_schedule_file(const std::string& path,
                            ScheduleFileFormat format = ScheduleFileFormat::ByExtension);

}  // namespace chimera::schedule
