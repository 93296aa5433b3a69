#pragma once
// One time line for the ranks of a job. Steady clocks differ between ranks: on a cluster each
// node's counts from that node's boot, and even on one node a barrier's exits, the usual
// stand-in for "the same instant", differ by its slowest message (milliseconds where its first
// messages set up TCP connections between hosts). Traces need the ranks' lanes to line up to
// well under a message's time.
#include <mpi.h>

#include "chimera/core/timer.hpp"

namespace chimera::comm {

// Rank 0's clock minus this rank's, from the quickest of a few ping-pongs with rank 0 (Cristian's
// method: rank 0's reading is taken to fall halfway through the round trip, so the error is at
// most half of the quickest one). Collective over `comm`; rank 0 gets 0. `clock` is the clock
// compared (seconds).
double offset_to_rank0(MPI_Comm comm, double (*clock)() = now_seconds);

}  // namespace chimera::comm
