#include "chimera/comm/clock_offset.hpp"

#include <limits>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

namespace {

double offset_on(MPI_Comm comm, double (*clock)()) {
  constexpr int kRounds = 8;
  constexpr int kTurnTag = 0, kPingTag = 1;
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer) {
      MPI_CHECK(MPI_Send(nullptr, 0, MPI_BYTE, peer, kTurnTag, comm));
      for (int round = 0; round < kRounds; ++round) {
        MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, peer, kPingTag, comm, MPI_STATUS_IGNORE));
        const double reading = clock();
        MPI_CHECK(MPI_Send(&reading, 1, MPI_DOUBLE, peer, kPingTag, comm));
      }
    }
    return 0.0;
  }
  // Ranks take turns; one waiting for its turn sleeps, so that where ranks share cores the
  // waiting ones do not stretch the round trips of the one being timed.
  MPI_Request turn = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Irecv(nullptr, 0, MPI_BYTE, 0, kTurnTag, comm, &turn));
  wait(turn, WaitPolicy{});
  double best_round_trip = std::numeric_limits<double>::infinity(), offset = 0.0;
  for (int round = 0; round < kRounds; ++round) {
    const double sent = clock();
    MPI_CHECK(MPI_Send(nullptr, 0, MPI_BYTE, 0, kPingTag, comm));
    double reading = 0.0;
    MPI_CHECK(MPI_Recv(&reading, 1, MPI_DOUBLE, 0, kPingTag, comm, MPI_STATUS_IGNORE));
    const double received = clock();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      offset = reading - 0.5 * (sent + received);
    }
  }
  return offset;
}

}  // namespace

double offset_to_rank0(MPI_Comm caller, double (*clock)()) {
  // Its own communicator, so that its tags never meet a message the caller has in flight.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(caller, &comm));
  const double offset = offset_on(comm, clock);
  MPI_CHECK(MPI_Comm_free(&comm));
  return offset;
}

}  // namespace chimera::comm
