// The executor's MPI transport (comm/mpi_transport.hpp) between the two workers of each pipeline
// group. The case here is a large message between two ranks of one node whose receiver starts
// waiting only after its sender's ring: without a single-copy transport the message moves in
// fragments, each needing tests on both sides, and the receiver sleeps on its doorbell. The
// sender's tests must keep waking it, or each fragment waits for the bell's cap (5 s here). CTest
// runs this binary a second time with Open MPI's single-copy mechanism off, which is what makes
// the case fail when the sender does not ring again; with it on, the message is in at the first
// test and the case passes either way.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/mpi_transport.hpp"
#include "chimera/comm/topology.hpp"
#include "chimera/core/timer.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

using chimera::testing::world_rank;
using chimera::testing::world_size;

// Two workers per group, one stage each: worker 0 sends activations to worker 1.
schedule::Schedule two_stage_schedule() {
  schedule::Schedule s;
  s.scheme = "gpipe";
  s.workers = 2;
  s.stages = 2;
  s.schedule_micro_batches = 1;
  s.placement = {{0, 1}};
  return s;
}

// The two workers of this rank's group, their transport with a 5 s cap on the bell's sleep (a
// wait that sleeps it out fails the cases' 2.5 s bound), and 16 MB messages: this rank's to
// send, holding its replica's number + 1, and the one it receives.
struct WorkerPair {
  static constexpr std::size_t kFloats = std::size_t{4} << 20;
  static WaitPolicy slow_bell() {
    WaitPolicy policy;
    policy.max_bell_sleep_us = 5e6;
    return policy;
  }
  schedule::Schedule sched = two_stage_schedule();
  Topology topo = Topology::make(world_size(), world_rank(), sched);
  Communicators comms{topo, MPI_COMM_WORLD};
  MpiTransport transport{sched, topo, comms, slow_bell(), kFloats};
  std::vector<float> out = std::vector<float>(kFloats, static_cast<float>(topo.replica + 1));
  std::vector<float> in = std::vector<float>(kFloats, -1.0F);
};

const schedule::Message activation{schedule::Payload::Activation, 0, 0, 0, 0, 1};
const schedule::Message gradient{schedule::Payload::Gradient, 0, 1, 0, 1, 0};

TEST(MpiTransport, ALargeMessageArrivesThoughItsReceiverWaitsAfterTheRing) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks (pairs of workers)";
  WorkerPair pair;
  auto& [sched, topo, comms, transport, out, in] = pair;

  // Worker 0 sends the activation and waits for the gradient, worker 1 the other way round.
  const bool sender = topo.worker == 0;
  const Transport::Request recv = transport.post_recv(sender ? gradient : activation, in.data());
  MPI_Barrier(MPI_COMM_WORLD);
  const Stopwatch clock;
  if (sender) {
    const Transport::Request send = transport.send(activation, out.data());
    transport.wait(recv, [] { return std::string("the gradient"); });
    transport.wait(send, [] { return std::string("the activation's send"); });
  } else {
    sleep_seconds(0.050);  // the ring of the activation's send comes before this wait
    transport.wait(recv, [] { return std::string("the activation"); });
    const Transport::Request send = transport.send(gradient, out.data());
    transport.wait(send, [] { return std::string("the gradient's send"); });
  }
  const double exchange_s = clock.seconds();
  EXPECT_EQ(in.front(), static_cast<float>(topo.replica + 1));
  EXPECT_EQ(in.back(), static_cast<float>(topo.replica + 1));
  EXPECT_LT(exchange_s, 2.5) << "a receiver slept on its bell while its message was in flight";
  MPI_Barrier(MPI_COMM_WORLD);
}

// The same message sent before its receive is posted: its announcement comes first, and the
// receiver's wait must still count it as under way.
TEST(MpiTransport, ALargeMessageSentBeforeItsReceiveIsPostedArrives) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks (pairs of workers)";
  WorkerPair pair;
  auto& [sched, topo, comms, transport, out, in] = pair;
  const Stopwatch clock;
  if (topo.worker == 0) {
    const Transport::Request send = transport.send(activation, out.data());
    MPI_Barrier(MPI_COMM_WORLD);
    transport.wait(send, [] { return std::string("the activation's send"); });
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    sleep_seconds(0.050);
    const Transport::Request recv = transport.post_recv(activation, in.data());
    transport.wait(recv, [] { return std::string("the activation"); });
    EXPECT_EQ(in.front(), static_cast<float>(topo.replica + 1));
    EXPECT_EQ(in.back(), static_cast<float>(topo.replica + 1));
  }
  EXPECT_LT(clock.seconds(), 2.5) << "a receiver slept on its bell while its message was in flight";
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace chimera::comm
