#pragma once
// Wake-ups between the ranks of one node (a wait must not spin a CPU). MPI has no call
// that sleeps until a message arrives, so a waiting rank either polls, and 32 pollers saturate a
// 2-core machine and delay the ranks that compute, or it sleeps and notices the message late.
// A doorbell is one 32-bit counter per rank in a node-shared MPI window: a sender rings the
// receiver's bell after MPI_Isend, and a receiver sleeps on it (a Linux futex) until it changes
// or a timeout passes. Beside it, each rank counts the messages each peer of its node has
// announced to it (posted), so that a wait can tell its own message under way from other rings.
// A peer on another node cannot ring; waits for it keep polling.
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace chimera::comm {

class Doorbells {
 public:
  // Collective over `comm`; the ranks of `comm` that share this rank's node get bells.
  explicit Doorbells(MPI_Comm comm);
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;

  // Whether `peer` (a rank of the communicator) can ring this rank and be rung by it.
  bool shared_with(int peer) const;
  // Wakes `peer` if it sleeps on its bell (no effect when !shared_with(peer)).
  void ring(int peer) const;
  // Counts a message just posted to `peer` as announced by this rank, then rings it.
  void announce(int peer) const;
  // How many messages `peer` has announced to this rank (0 when !shared_with(peer)).
  std::uint32_t announced_by(int peer) const;
  // This rank's counter now: read it before testing for what you wait for, then pass it to
  // sleep(), so that a ring in between is never lost.
  std::uint32_t seen() const;
  // Sleeps until this rank's counter differs from `seen` or `max_us` microseconds pass.
  void sleep(std::uint32_t seen, double max_us) const;

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;  // in the communicator
  std::uint32_t* mine_ = nullptr;
  // [rank of comm] its counter, or null on another node; the counts of announced messages
  // follow it, one per rank of the communicator.
  std::vector<std::uint32_t*> bell_;
};

}  // namespace chimera::comm
