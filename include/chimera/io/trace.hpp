#pragma once
// Chrome trace (DESIGN §5): `traceEvents` of complete events (`ph: "X"`), pid = rank,
// tid 0 compute / 1 p2p / 2 allreduce, ts/dur in microseconds from one barrier-aligned origin.
// Opens in Perfetto (ui.perfetto.dev) and chrome://tracing; analysis/ draws Gantt charts from it.
#include <cstdint>
#include <string>
#include <vector>

namespace chimera::io {

enum class TraceLane : int { Compute = 0, P2P = 1, Allreduce = 2 };

struct TraceEvent {
  std::string name;
  TraceLane lane = TraceLane::Compute;
  double ts_us = 0.0;  // start, from the run's common origin
  double dur_us = 0.0;
  std::int64_t step = 0;
};

// One rank's events as compact text (one event a line) so ranks can ship them to rank 0 with a
// plain MPI_Gatherv of bytes, and the parser on the other side.
std::string serialize_events(const std::vector<TraceEvent>& events);
std::vector<TraceEvent> parse_events(const std::string& text);

// Writes the whole trace; events_per_rank[r] become pid r. Thread names label the lanes.
void write_chrome_trace(const std::string& path,
                        const std::vector<std::vector<TraceEvent>>& events_per_rank);

}  // namespace chimera::io
