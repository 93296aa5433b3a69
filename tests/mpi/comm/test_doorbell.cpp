// Doorbells (comm/doorbell.hpp): a ring wakes a sleeping rank long before its timeout, a ring
// that comes before the sleep is not lost, a sleep without a ring ends at its timeout, and a
// wait for a message sleeps on the bell yet completes with the right data. Waits are bounded
// (seconds), so a broken bell fails a test instead of hanging the job. Bells are rung only
// within a node: on several hosts each rank rings the next rank of its own node, and a rank
// alone on its node (a one-rank shared window) is rung by a thread of its own.
#include <gtest/gtest.h>
#include <mpi.h>

#include <thread>
#include <vector>

#include "chimera/comm/doorbell.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/timer.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

using chimera::testing::world_rank;
using chimera::testing::world_size;

TEST(Doorbells, EveryRankOfTheNodeHasABell) {
  const Doorbells bells(MPI_COMM_WORLD);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  int shared = 0;
  for (int r = 0; r < world_size(); ++r) shared += bells.shared_with(r) ? 1 : 0;
  EXPECT_EQ(shared, node_size);
  EXPECT_TRUE(bells.shared_with(world_rank()));
}

// The next rank of this rank's node (world rank), itself where it is alone there; and this
// rank's index among the ranks of its node.
struct NodePeer {
  int next = 0;
  int index = 0;
  int size = 0;
};

NodePeer node_peer(const Doorbells& bells) {
  NodePeer p;
  const int n = world_size();
  for (int r = 0; r < n; ++r) {
    if (!bells.shared_with(r)) continue;
    if (r < world_rank()) ++p.index;
    ++p.size;
  }
  p.next = world_rank();
  for (int step = 1; step < n; ++step) {
    const int r = (world_rank() + step) % n;
    if (bells.shared_with(r)) {
      p.next = r;
      break;
    }
  }
  return p;
}

// Rank r rings the next rank of its node after a pause; every rank sleeps on its bell with a
// 10 s timeout. A rank alone on its node is rung by its own thread.
TEST(Doorbells, ARingWakesTheSleeperBeforeItsTimeout) {
  const Doorbells bells(MPI_COMM_WORLD);
  const NodePeer peer = node_peer(bells);
  const std::uint32_t seen = bells.seen();
  MPI_Barrier(MPI_COMM_WORLD);
  std::thread ringer;
  if (peer.size == 1) {
    ringer = std::thread([&] {
      sleep_seconds(0.050);
      bells.ring(peer.next);
    });
  } else if (peer.index % 2 == 0) {
    // Even ranks ring first, so that half of the ranks surely sleep before their ring comes.
    sleep_seconds(0.050);
    bells.ring(peer.next);
  }
  const Stopwatch clock;
  bells.sleep(seen, 10e6);
  EXPECT_LT(clock.seconds(), 5.0) << "rank " << world_rank() << " slept to its timeout";
  if (peer.size > 1 && peer.index % 2 != 0) bells.ring(peer.next);
  if (ringer.joinable()) ringer.join();
  EXPECT_NE(bells.seen(), seen);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Doorbells, ARingBeforeTheSleepIsNotLost) {
  const Doorbells bells(MPI_COMM_WORLD);
  const std::uint32_t seen = bells.seen();
  MPI_Barrier(MPI_COMM_WORLD);
  bells.ring(node_peer(bells).next);
  MPI_Barrier(MPI_COMM_WORLD);
  const Stopwatch clock;
  bells.sleep(seen, 10e6);
  EXPECT_LT(clock.seconds(), 5.0);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Doorbells, ASleepWithoutARingEndsAtItsTimeout) {
  const Doorbells bells(MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const Stopwatch clock;
  bells.sleep(bells.seen(), 30e3);
  EXPECT_GE(clock.seconds(), 0.020);
  EXPECT_LT(clock.seconds(), 5.0);
  MPI_Barrier(MPI_COMM_WORLD);
}

// A ring of messages: each rank sends to the next after a pause and rings it; the receiver's
// wait sleeps on its bell (a 5 s cap) and must complete with the sender's data at the ring.
// A sender on another host cannot ring: there the wait polls, as the transport's does.
TEST(Doorbells, AWaitOnTheBellCompletesTheReceive) {
  const Doorbells bells(MPI_COMM_WORLD);
  const int n = world_size();
  const int next = (world_rank() + 1) % n;
  const int prev = (world_rank() + n - 1) % n;
  int incoming = -1;
  MPI_Request recv = MPI_REQUEST_NULL;
  MPI_Irecv(&incoming, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, &recv);
  MPI_Barrier(MPI_COMM_WORLD);
  sleep_seconds(0.030);
  const int outgoing = 1000 + world_rank();
  MPI_Request send = MPI_REQUEST_NULL;
  MPI_Isend(&outgoing, 1, MPI_INT, next, 7, MPI_COMM_WORLD, &send);
  bells.ring(next);
  WaitPolicy policy;
  policy.max_bell_sleep_us = 5e6;
  const Stopwatch clock;
  wait(recv, policy, nullptr, nullptr, bells.shared_with(prev) ? &bells : nullptr);
  EXPECT_EQ(incoming, 1000 + prev);
  EXPECT_LT(clock.seconds(), 4.0) << "the wait slept to its cap instead of waking at the ring";
  wait(send, WaitPolicy{});
  MPI_Barrier(MPI_COMM_WORLD);
}

// A message announced to the next rank of the node counts there as announced by this rank and
// no other; a plain ring (as a receiver's "your message is in") counts as none. A rank alone on
// its node announces to itself.
TEST(Doorbells, AnAnnouncementCountsOnlyForItsSender) {
  const Doorbells bells(MPI_COMM_WORLD);
  const NodePeer peer = node_peer(bells);
  const int n = world_size();
  std::vector<std::uint32_t> before(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) before[static_cast<std::size_t>(r)] = bells.announced_by(r);
  MPI_Barrier(MPI_COMM_WORLD);
  bells.ring(peer.next);
  bells.announce(peer.next);
  MPI_Barrier(MPI_COMM_WORLD);
  // The rank whose next is this one: the previous rank of this node.
  int previous = world_rank();
  for (int step = 1; step < n; ++step) {
    const int r = (world_rank() + n - step) % n;
    if (bells.shared_with(r)) {
      previous = r;
      break;
    }
  }
  for (int r = 0; r < n; ++r) {
    const std::uint32_t added = bells.announced_by(r) - before[static_cast<std::size_t>(r)];
    EXPECT_EQ(added, r == previous ? 1U : 0U) << "rank " << world_rank() << ", sender " << r;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace chimera::comm
