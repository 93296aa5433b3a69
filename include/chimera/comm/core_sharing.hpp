#pragma once
// Whether the ranks of a node share its cores, and how long a rank waited for one. With more
// ranks than cores, a rank that is ready to compute waits for a core, and the measured bubble
// counts that wait as if the schedule had caused it: the trainer reports it beside the bubble.
#include <mpi.h>

#include <optional>
#include <string_view>

namespace chimera::comm {

struct CoreSharing {
  int ranks_on_node = 1;
  int cores = 1;  // CPUs in the union of the affinity masks of the node's ranks
  bool oversubscribed() const { return ranks_on_node > cores; }
};

// Collective over `world`: the ranks sharing this rank's memory, and the CPUs they may run on.
CoreSharing core_sharing(MPI_Comm world);

// The seconds the thread that made it has spent runnable but not running (Linux schedstat's
// run-queue delay). Keeps the file open, so a reading costs one pread: cheap enough around every
// compute op of a step.
class RunQueueClock {
 public:
  RunQueueClock();
  ~RunQueueClock();
  RunQueueClock(const RunQueueClock&) = delete;
  RunQueueClock& operator=(const RunQueueClock&) = delete;

  // Where the kernel does not say, every reading is nullopt.
  std::optional<double> seconds() const;

 private:
  int fd_ = -1;
};

// The run-queue delay in seconds from a schedstat line "<on-CPU ns> <run-queue ns> <slices>".
std::optional<double> parse_schedstat(std::string_view text);

}  // namespace chimera::comm
