#include "trace_collector.hpp"

#include <climits>

#include "chimera/comm/clock_offset.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

TraceCollector::TraceCollector(MPI_Comm comm, std::string path)
    : comm_(comm), path_(std::move(path)) {
  if (!enabled()) return;
  // One origin on rank 0's clock, taken into each rank's own clock.
  const double offset = comm::offset_to_rank0(comm_);
  double origin_on_rank0 = now_seconds();
  // Ranks already timed wait without spinning: where ranks share cores, spinning ones would
  // stretch the round trips of those still timed.
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibcast(&origin_on_rank0, 1, MPI_DOUBLE, 0, comm_, &request));
  comm::wait(request, comm::WaitPolicy{});
  origin_s_ = origin_on_rank0 - offset;
  // Time 0 of the trace on this machine's monotonic clock, so that samples taken outside the
  // run (a link's byte counters, say) can be laid beside its lanes.
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (rank == 0) log::info("trace: time 0 is {:.6f} s on rank 0's steady clock", origin_s_);
}

void TraceCollector::write() {
  if (!enabled()) return;
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  MPI_CHECK(MPI_Comm_size(comm_, &size));
  const std::string mine = io::serialize_events(events_);
  CHIMERA_CHECK(mine.size() < static_cast<std::size_t>(INT_MAX),
                "trace of rank {} is too large to gather ({} bytes): trace fewer steps", rank,
                mine.size());
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_));
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += lengths[static_cast<std::size_t>(r)];
  }
  CHIMERA_CHECK(rank != 0 || total < INT_MAX, "the merged trace is too large ({} bytes)", total);
  std::string all(rank == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  MPI_CHECK(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                        MPI_CHAR, 0, comm_));
  if (rank != 0) return;
  std::vector<std::vector<io::TraceEvent>> per_rank;
  for (int r = 0; r < size; ++r) {
    per_rank.push_back(io::parse_events(
        all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                   static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]))));
  }
  io::write_chrome_trace(path_, per_rank);
}

}  // namespace chimera::runtime
