#pragma once
// Collects this rank's trace events over a run and, at the end, ships every rank's events to
// rank 0, which writes one Chrome trace (pid = rank). Every rank measures its clock against rank
// 0's, so that all lanes count from one instant and a message's send and its receipt line up.
#include <mpi.h>

#include <string>
#include <vector>

#include "chimera/io/trace.hpp"

namespace chimera::runtime {

class TraceCollector {
 public:
  // Collective over `comm` when tracing: every rank takes the common origin in its own clock.
  TraceCollector(MPI_Comm comm, std::string path);

  bool enabled() const { return !path_.empty(); }
  double origin_s() const { return origin_s_; }
  std::vector<io::TraceEvent>* events() { return enabled() ? &events_ : nullptr; }

  // Collective: gathers to rank 0, which writes the file.
  void write();

 private:
  MPI_Comm comm_;
  std::string path_;
  double origin_s_ = 0.0;
  std::vector<io::TraceEvent> events_;
};

}  // namespace chimera::runtime
