#pragma once
// The gradient sums of an iteration as Open MPI's non-blocking in-place allreduce (libnbc) runs
// them over TCP: every sum a binomial reduce to its rank 0 and a broadcast in which a rank sends
// to all its children at once, every message a flow on its sender's outgoing and its receiver's
// incoming link. How flows share a link was measured on emulated hosts (docs/scaling.md):
//  - messages between one pair of ranks go through one connection, one after the other, in the
//    order they were posted (UCX sends a connection's requests in turn);
//  - messages of different connections crossing one link share it: each flow's rate is its
//    weighted max-min fair share of the links it crosses (a link of rate 1 link-time per unit of
//    time); a flow weighs 1 unless another rank of its host started a sum on the link before
//    its rank did (Costs::later_rank_weight).
// A link direction carrying a pipeline message (booked in `out`/`in` by the replay) moves no
// sum's bytes meanwhile: the activations go first, as in the replay.
#include <vector>

#include "chimera/schedule/simulate.hpp"
#include "link_bookings.hpp"

namespace chimera::schedule::detail {

struct BinomialSum {
  double ready = 0;        // the last rank's start: the sum ends no earlier
  std::vector<int> ranks;  // the world rank of each of the communicator's ranks
  std::vector<int> hosts;  // the host of each of the communicator's ranks
  // When each of the communicator's ranks starts the sum (one per rank). A rank sends
  // as soon as it has started and has what it sends: over TCP the runtime sends eagerly, so the
  // bytes move before their receiver has started (docs/scaling.md).
  std::vector<double> rank_ready;
  double bytes = 0;
};

// When each sum has ended (its last rank has the sum; `ready` for one rank). A message between
// hosts takes its link time beta * bytes at full rate and arrives alpha after its last byte; one
// within a host takes host_alpha + host_beta * bytes. `out`, `in`: each host's link directions.
std::vector<double> binomial_sums_end(const std::vector<BinomialSum>& sums, const Costs& c,
                                      const std::vector<LinkBookings>& out,
                                      const std::vector<LinkBookings>& in);

}  // namespace chimera::schedule::detail
