// The simulator: op costs, messages, receive posting, allreduce, statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

double duration(const OpSpan& s) {
  return s.end - s.start;
}

// The one parser behind `chimera train --cost`, `chimera schedule --cost` and `chimera plan
// --cost`.
TEST(Costs, ParseTwoOrThreeFields) {
  const Costs c = Costs::parse("10:20");
  EXPECT_DOUBLE_EQ(c.F, 10.0);
  EXPECT_DOUBLE_EQ(c.B, 20.0);
  EXPECT_DOUBLE_EQ(c.I, 10.0);
  EXPECT_DOUBLE_EQ(c.W, 10.0);
  const Costs split = Costs::parse("1:2:0.5");
  EXPECT_DOUBLE_EQ(split.W, 0.5);
  EXPECT_DOUBLE_EQ(split.I, 1.5);
  EXPECT_DOUBLE_EQ(Costs::parse("1:2:2").I, 0.0);  // all of the backward is weight gradient
  for (const char* bad : {"10", "10:x", "10:-1", "0:1", "1:2:3", "1:2:3:4", "1:1e300", "1:nan",
                          "1:inf", "", ":", "1::2", " 1:2"})
    EXPECT_THROW(Costs::parse(bad), InputError) << bad;
}

TEST(Simulate, OpCostsScaleWithWhatTheyCover) {
  const Costs c = Costs::forward_backward(1, 3);
  const Schedule doubling = make_schedule(request("chimera", 4, 8, "doubling"));
  const Schedule halving = make_schedule(request("chimera", 4, 8, "halving"));
  const Schedule inter = make_schedule(request("interleaved", 4, 8, "", 0, 4));
  for (const auto* s : {&doubling, &halving, &inter}) {
    const SimResult r = simulate(*s, c);
    for (int w = 0; w < s->workers; ++w) {
      for (const OpSpan& span : r.timeline[w]) {
        const Op& op = s->ops[w][span.op];
        double expected = op.kind == OpKind::F ? 1 : 3;
        if (s->variant == "doubling" && op.kind == OpKind::F) expected = 2;   // two micro-batches
        if (s->variant == "halving" && op.kind == OpKind::B) expected = 1.5;  // half of one
        if (s->scheme == "interleaved") expected /= 4;                        // 1/v of the slice
        ASSERT_DOUBLE_EQ(duration(span), expected) << s->scheme << " " << s->variant;
      }
    }
  }
}

TEST(Simulate, SplitBackwardUsesIAndW) {
  Costs c = Costs::forward_backward(1, 3);
  c.I = 2;
  c.W = 1;
  const Schedule s = make_schedule(request("zb-h1", 4, 4));
  const SimResult r = simulate(s, c);
  for (int w = 0; w < 4; ++w) {
    for (const OpSpan& span : r.timeline[w]) {
      const OpKind k = s.ops[w][span.op].kind;
      ASSERT_DOUBLE_EQ(duration(span), k == OpKind::F ? 1 : k == OpKind::I ? 2 : 1);
    }
  }
}

TEST(Simulate, MessagesCostAlphaPlusBetaBytes) {
  Costs c = Costs::forward_backward(1, 2);
  c.alpha = 0.5;
  c.beta = 0.01;
  c.activation_bytes = 100;
  c.gradient_bytes = 50;
  const SimResult r = simulate(make_schedule(request("gpipe", 2, 1)), c);
  // F on 0, activation 1.5, F and B on 1, gradient 1.0, B on 0.
  EXPECT_DOUBLE_EQ(r.makespan, 1 + 1.5 + 1 + 2 + 1.0 + 2);
}

TEST(Simulate, TransferWaitsForTheReceiveToBePosted) {
  // 1F1B, D=2, N=2: worker 1 runs F0 B0 F1 B1. The receive for F1 is posted after F0 (lower.hpp),
  // at t=3, although worker 0 sent F1's activation at t=2; it arrives at 3 + alpha = 4.
  Costs c = Costs::forward_backward(1, 0.5);
  c.alpha = 1;
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  ASSERT_EQ(s.ops[1][2], (Op{OpKind::F, 0, 1, {1}}));
  const SimResult r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 2);  // F0 after F on worker 0 (1) + alpha (1)
  EXPECT_DOUBLE_EQ(r.timeline[1][1].end, 3.5);  // B0
  EXPECT_DOUBLE_EQ(r.timeline[1][2].start, 4);  // F1: posted at 3, transferred by 4
}

TEST(Simulate, AllreduceHiddenAndExposed) {
  // Chimera D=2, N=2, F=B=1: stage 1's last backward ends at 3 on both holders, stage 0's at 4.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 0.1;
  c.stage_grad_bytes = 10;
  const Schedule s = make_schedule(request("chimera", 2, 2));
  SimResult r = simulate(s, c);
  ASSERT_DOUBLE_EQ(r.makespan, 4);
  // Two replicas per stage: 2 * (1/2) * 0.1 * 10 = 1.
  EXPECT_EQ(r.allreduce[1].replicas, 2);
  EXPECT_DOUBLE_EQ(r.allreduce[1].ready, 3);
  EXPECT_DOUBLE_EQ(r.allreduce[1].end, 4);
  EXPECT_DOUBLE_EQ(r.allreduce[1].hidden, 1);
  EXPECT_DOUBLE_EQ(r.allreduce[0].start, 4);
  EXPECT_DOUBLE_EQ(r.allreduce[0].hidden, 0);
  EXPECT_DOUBLE_EQ(r.iteration_time, 5);
  EXPECT_DOUBLE_EQ(r.allreduce_total, 2);
  EXPECT_DOUBLE_EQ(r.allreduce_hidden, 1);
  EXPECT_DOUBLE_EQ(r.allreduce_exposed, 1);

  // Four replicas (W = 2): 2*(3/4)*0.1*10 = 1.5 each, and stage 0's waits for stage 1's on the
  // same workers.
  c.data_parallel = 2;
  r = simulate(s, c);
  EXPECT_EQ(r.allreduce[0].replicas, 4);
  EXPECT_DOUBLE_EQ(r.allreduce[1].end, 3 + 1.5);
  EXPECT_DOUBLE_EQ(r.allreduce[0].start, 3 + 1.5);
  EXPECT_DOUBLE_EQ(r.iteration_time, 3 + 2 * 1.5);
  EXPECT_DOUBLE_EQ(r.allreduce_exposed, 3 + 2 * 1.5 - 4);

  // Latency adds 2*log2(r)*alpha per allreduce (alpha also delays the p2p messages).
  c.alpha = 0.1;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.allreduce[1].end - r.allreduce[1].start, 2 * 2 * 0.1 + 1.5);
}

TEST(Simulate, ShardedStepWithAFreeNetworkIsTheUnshardedStep) {
  Costs c = Costs::parse("1:2:1");
  c.stage_grad_bytes = 1e6;  // sizes without a price: nothing may change
  c.tied_grad_bytes = 1e5;
  c.activation_bytes = 1e3;
  c.gradient_bytes = 1e3;
  c.data_parallel = 2;
  for (const ScheduleRequest& req :
       {request("1f1b", 4, 8), request("chimera", 4, 8), request("chimera", 4, 8, "doubling"),
        request("chimera", 8, 16, "direct", 4), request("zb-h1", 4, 8), request("zb-v", 4, 8),
        request("interleaved", 4, 8, "", 0, 2), request("gems", 4, 4)}) {
    const Schedule s = make_schedule(req);
    const SimResult plain = simulate(s, c);
    const SimResult sharded = simulate(s, c, {.shard_optimizer = true});
    EXPECT_FALSE(plain.sharded);
    EXPECT_TRUE(sharded.sharded);
    EXPECT_DOUBLE_EQ(sharded.makespan, plain.makespan) << s.scheme;
    EXPECT_DOUBLE_EQ(sharded.iteration_time, plain.iteration_time) << s.scheme;
    EXPECT_EQ(sharded.busy, plain.busy) << s.scheme;
    EXPECT_DOUBLE_EQ(sharded.gather_total, 0) << s.scheme;
    for (int w = 0; w < s.workers; ++w) {
      ASSERT_EQ(sharded.timeline[w].size(), plain.timeline[w].size());
      for (std::size_t k = 0; k < plain.timeline[w].size(); ++k) {
        EXPECT_DOUBLE_EQ(sharded.timeline[w][k].start, plain.timeline[w][k].start) << s.scheme;
      }
    }
  }
}

TEST(Simulate, ShardedSumIsAReduceScatterAndGathersSharingALinkDelayTheFirstForward) {
  // Chimera D=2, N=2, F=B=1, W=2: every stage has 4 replicas (both workers, twice). Its
  // reduce-scatter and its all-gather each cost (3/4) * 0.1 * 10 = 0.75, half the allreduce.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 0.1;
  c.stage_grad_bytes = 10;
  c.data_parallel = 2;
  const Schedule s = make_schedule(request("chimera", 2, 2));
  const SimResult plain = simulate(s, c);
  const SimResult r = simulate(s, c, {.shard_optimizer = true});
  // Both gathers start at the step boundary and cross both workers' links, which they share
  // equally: each ends after twice its own time, not one after the other.
  for (int st = 0; st < 2; ++st) {
    EXPECT_DOUBLE_EQ(r.allreduce[st].gather_start, 0);
    EXPECT_DOUBLE_EQ(r.allreduce[st].gather_end, 1.5);
  }
  EXPECT_DOUBLE_EQ(r.gather_total, 1.5);
  // Both workers start with stage 0 (worker 0 on the down pipe, worker 1 on the up pipe), whose
  // first forward waits for its gather: 1.5 late on both workers, and the whole step with it.
  for (int w = 0; w < 2; ++w) {
    EXPECT_DOUBLE_EQ(plain.timeline[w][0].start, 0);
    EXPECT_DOUBLE_EQ(r.timeline[w][0].start, 1.5);
    EXPECT_DOUBLE_EQ(r.gather_wait[w], 1.5);
  }
  EXPECT_DOUBLE_EQ(r.makespan, plain.makespan + 1.5);
  // The reduce-scatters (the ring: Simulate.ShardedSumIsTheRingPieceByPiece) start at the
  // stages' GradReady, 1.5 later.
  for (int st = 0; st < 2; ++st) {
    EXPECT_DOUBLE_EQ(r.allreduce[st].ready, plain.allreduce[st].ready + 1.5);
  }

  // With Open MPI's libnbc the all-gather is its linear one, 3 (beta L / 4) with beta L = 1 over
  // 4 ranks.
  c.binomial_allreduce = true;
  const SimResult nbc = simulate(s, c, {.shard_optimizer = true});
  EXPECT_DOUBLE_EQ(nbc.allreduce[0].gather_end, 1.5);
  // Latency: log2(4) alpha for the all-gather, half of Rabenseifner's. The tied table (no bytes
  // here, 0.02 of link time) shares the links with the two stages' gathers (0.77 each): it ends
  // after 3 x 0.02, they after 0.06 + 2 x 0.75.
  c.binomial_allreduce = false;
  c.alpha = 0.01;
  const SimResult slow = simulate(s, c, {.shard_optimizer = true});
  EXPECT_DOUBLE_EQ(slow.tied.gather_end, 3 * 2 * 0.01);
  EXPECT_DOUBLE_EQ(slow.allreduce[0].gather_end, 3 * 2 * 0.01 + 2 * 0.75);
  EXPECT_DOUBLE_EQ(slow.allreduce[1].gather_end, 3 * 2 * 0.01 + 2 * 0.75);
}

TEST(Simulate, ShardedSumIsTheRingPieceByPiece) {
  // Chimera D=2 N=2, F=B=1, one replica: each stage is summed by a ring of its two holders
  // (ranks 0 and 1, one step), here in two pieces of 1 byte (link time 0.25 each). The step
  // starts with the two stages' weight gathers (0.5 each, sharing both links: both end at 1), so
  // both workers end stage 1's backward at 4, then run stage 0's until 5. Stage 1's first piece
  // goes at 4 (4 to 4.25); the second is posted at the holders' next MPI call, the end of that
  // op: 5 to 5.25. Stage 0's ring, from 5, waits for it on the same links: 5.25 to 5.75.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 0.25;
  c.stage_grad_bytes = 4;
  c.ring_piece_bytes = 1;
  const Schedule s = make_schedule(request("chimera", 2, 2));
  SimResult r = simulate(s, c, {.shard_optimizer = true});
  ASSERT_DOUBLE_EQ(r.allreduce[1].gather_end, 1);
  ASSERT_DOUBLE_EQ(r.allreduce[1].start, 4);
  ASSERT_DOUBLE_EQ(r.allreduce[0].start, 5);
  EXPECT_DOUBLE_EQ(r.allreduce[1].end, 5.25);
  EXPECT_DOUBLE_EQ(r.allreduce[0].end, 5.75);
  EXPECT_DOUBLE_EQ(r.iteration_time, 5.75);
  // Two blocks per op: the call halfway through it posts the second piece at 4.5.
  c.layers = 4;
  r = simulate(s, c, {.shard_optimizer = true});
  EXPECT_DOUBLE_EQ(r.allreduce[1].end, 4.75);
  EXPECT_DOUBLE_EQ(r.allreduce[0].end, 5.5);
  // GPipe D=1 over 4 replicas: a ring of 4 ranks, 3 steps of a shard of 1 byte, one piece
  // each, which arrives alpha after its last byte.
  c.alpha = 0.01;
  c.data_parallel = 4;
  r = simulate(make_schedule(request("gpipe", 1, 1)), c, {.shard_optimizer = true});
  EXPECT_NEAR(r.allreduce[0].end - r.allreduce[0].start, 3 * (0.25 + 0.01), 1e-12);
}

TEST(Simulate, TheTiedTablesGatherIsNeededAtEitherEnd) {
  // 1F1B D=2 W=1: stages 0 and 1 have one holder each (nothing to gather), the tied table two
  // (workers 0 and 1): (1/2) * 1 * 4 = 2, waited for before each worker's first op.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.tied_grad_bytes = 4;
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  const SimResult plain = simulate(s, c);
  const SimResult r = simulate(s, c, {.shard_optimizer = true});
  EXPECT_DOUBLE_EQ(r.tied.gather_end, 2);
  EXPECT_DOUBLE_EQ(r.timeline[0][0].start, 2);
  EXPECT_DOUBLE_EQ(r.makespan, plain.makespan + 2);
  EXPECT_DOUBLE_EQ(r.tied.end - r.tied.start, 2);
  EXPECT_DOUBLE_EQ(plain.tied.end - plain.tied.start, 4);
}

TEST(Simulate, RanksOfOneHostTalkThroughMemory) {
  // As MessagesCostAlphaPlusBetaBytes, with both workers on one host: host_alpha + host_beta n.
  Costs c = Costs::forward_backward(1, 2);
  c.alpha = 0.5;
  c.beta = 0.01;
  c.activation_bytes = 100;
  c.gradient_bytes = 50;
  c.ranks_per_host = 2;
  c.host_alpha = 0.25;
  c.host_beta = 0.001;
  const SimResult r = simulate(make_schedule(request("gpipe", 2, 1)), c);
  EXPECT_DOUBLE_EQ(r.makespan, 1 + 0.35 + 1 + 2 + 0.3 + 2);
}

TEST(Simulate, MessagesOnOneLinkTakeTurns) {
  // GPipe D=2 N=2: worker 0 sends F0's activation at 1 and F1's at 2; each holds the link for
  // beta n = 3, so the second is through at 7, not at 2 + 3 = 5, although both receives are
  // posted before.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.activation_bytes = 3;
  const Schedule s = make_schedule(request("gpipe", 2, 2));
  const SimResult r = simulate(s, c);
  ASSERT_EQ(s.ops[1][1].kind, OpKind::F);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 4);
  EXPECT_DOUBLE_EQ(r.timeline[1][1].start, 7);
  // On one host the two go through memory (free here): F1 follows F0.
  c.ranks_per_host = 2;
  const SimResult local = simulate(s, c);
  EXPECT_DOUBLE_EQ(local.timeline[1][0].start, 1);
  EXPECT_DOUBLE_EQ(local.timeline[1][1].start, 2);
}

TEST(Simulate, ARendezvousMovesOnceTheSenderIsOutOfItsOp) {
  // GPipe D=2 N=2, F = B = 1, each activation 3 bytes at beta 1. Eager: F0's activation moves at
  // 1 (in at 4), F1's takes the link after it (4 to 7). Over a rendezvous (messages over 2
  // bytes), F0's moves only when worker 0 has finished F1, which it started on posting the send
  // (2 to 5); F1's, posted before worker 0 waits, moves at once, after F0's on the link (5 to 8).
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.activation_bytes = 3;
  const Schedule s = make_schedule(request("gpipe", 2, 2));
  SimResult r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 4);
  EXPECT_DOUBLE_EQ(r.timeline[1][1].start, 7);
  c.rendezvous_bytes = 2;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 5);
  EXPECT_DOUBLE_EQ(r.timeline[1][1].start, 8);
  // Messages up to the size move eagerly; within a host they never wait for the sender.
  c.rendezvous_bytes = 3;
  EXPECT_DOUBLE_EQ(simulate(s, c).timeline[1][0].start, 4);
  c.rendezvous_bytes = 2;
  c.ranks_per_host = 2;
  EXPECT_DOUBLE_EQ(simulate(s, c).timeline[1][0].start, 1);
}

TEST(Simulate, ARendezvousWaitsForTheReceiverToLeaveItsOp) {
  // 1F1B D=2 N=3, F = 1, B = 4, free activations, input gradients of 3 bytes at beta 1. Worker
  // 1 sends B1's gradient at 11 and waits (for F2's input); worker 0 posts its receive at 13,
  // then computes F2 (13 to 14). Eager, the gradient moves 13 to 16 and B1 starts at 16. Over a
  // rendezvous worker 0 answers the request only when F2 ends: it moves 14 to 17. B0's
  // gradient is not delayed: its sender waits (for F1's input) right after sending it.
  Costs c = Costs::forward_backward(1, 4);
  c.beta = 1;
  c.activation_bytes = 0;
  c.gradient_bytes = 3;
  const Schedule s = make_schedule(request("1f1b", 2, 3));
  ASSERT_EQ(s.ops[0][2].kind, OpKind::B);
  ASSERT_EQ(s.ops[0][3].kind, OpKind::F);
  ASSERT_EQ(s.ops[0][4].kind, OpKind::B);
  SimResult r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.timeline[0][2].start, 9);
  EXPECT_DOUBLE_EQ(r.timeline[0][3].start, 13);
  EXPECT_DOUBLE_EQ(r.timeline[0][4].start, 16);
  c.rendezvous_bytes = 2;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.timeline[0][2].start, 9);
  EXPECT_DOUBLE_EQ(r.timeline[0][4].start, 17);
}

TEST(Simulate, ARendezvousMovesAtTheNextBlockOfTheOpsOnEitherSide) {
  // The two cases above with 8 layers: 4 blocks per stage, so every op makes an MPI call after
  // each quarter of it. GPipe: F0's activation moves once worker 0 is a quarter into F1 (1.25,
  // in at 4.25), F1's after it on the link (4.25 to 7.25).
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.activation_bytes = 3;
  c.rendezvous_bytes = 2;
  c.layers = 8;
  SimResult r = simulate(make_schedule(request("gpipe", 2, 2)), c);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 4.25);
  EXPECT_DOUBLE_EQ(r.timeline[1][1].start, 7.25);
  // 1F1B: worker 0 answers B1's gradient half-way through F2 (2 blocks per stage: 13.5), so it
  // is in at 16.5 instead of F2's end plus 3.
  c = Costs::forward_backward(1, 4);
  c.beta = 1;
  c.activation_bytes = 0;
  c.gradient_bytes = 3;
  c.rendezvous_bytes = 2;
  c.layers = 4;
  r = simulate(make_schedule(request("1f1b", 2, 3)), c);
  EXPECT_DOUBLE_EQ(r.timeline[0][4].start, 16.5);
}

TEST(Simulate, ABinomialSumIsLibnbcsTreeOnBothDirectionsOfTheLinks) {
  // GPipe D=1 over W replicas, one rank per host, F = B = 1: the stage's gradient is ready at 2
  // and each message of it takes beta L = 10. libnbc's in-place allreduce: a binomial reduce to
  // rank 0, then rank 0 sends to its children at once. W = 2: 10 up, 10 down. W = 4: two rounds
  // up (20), then rank 0's two sends share its link (20) before rank 1 sends on (10): 5 beta L.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.stage_grad_bytes = 10;
  c.binomial_allreduce = true;
  const Schedule s = make_schedule(request("gpipe", 1, 1));
  c.data_parallel = 2;
  EXPECT_DOUBLE_EQ(simulate(s, c).iteration_time, 2 + 20);
  c.data_parallel = 4;
  EXPECT_DOUBLE_EQ(simulate(s, c).iteration_time, 2 + 50);
  // Three replicas: the reduce 1 -> 0, then 2 -> 0; the broadcast 0 -> 1 and 0 -> 2 at once.
  c.data_parallel = 3;
  EXPECT_DOUBLE_EQ(simulate(s, c).iteration_time, 2 + 40);
}

// F = B = 1 and every stage message of a sum taking 10 alone (beta 1, 10 bytes), the sums
// libnbc's binomial trees.
SimResult simulate_binomial_sums(const ScheduleRequest& req, int replicas, int ranks_per_host = 1,
                                 double gradient_bytes = 0) {
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.stage_grad_bytes = 10;
  c.gradient_bytes = gradient_bytes;
  c.binomial_allreduce = true;
  c.data_parallel = replicas;
  c.ranks_per_host = ranks_per_host;
  return simulate(make_schedule(req), c);
}

// The sum was ready at `ready` and ended at `end`.
void expect_sum(const StageAllreduce& a, double ready, double end) {
  EXPECT_DOUBLE_EQ(a.ready, ready) << "stage " << a.stage;
  EXPECT_DOUBLE_EQ(a.end, end) << "stage " << a.stage;
}

TEST(Simulate, BinomialSumsOfDifferentConnectionsShareALinkEqually) {
  // 1F1B D=2 N=1 W=2, both workers on one host: stage 1's sum (ranks 1 and 3) is ready at 3,
  // stage 0's (ranks 0 and 2) at 4. The two reduce messages cross host 1's outgoing and host 0's
  // incoming link, from 4 at half rate each: stage 1's ends at 4 + 2 * 9 = 22, stage 0's at 23.
  // Stage 1's broadcast has the other direction alone from 22 to 23, then shares it with stage
  // 0's: it ends at 23 + 2 * 9 = 41, stage 0's at 42. (Taking turns would end them at 23 and 33:
  // flows of different connections do not, measured on TCP links.)
  const SimResult r = simulate_binomial_sums(request("1f1b", 2, 1), 2, 2);
  expect_sum(r.allreduce[1], 3, 41);
  expect_sum(r.allreduce[0], 4, 42);
  EXPECT_DOUBLE_EQ(r.iteration_time, 42);
}

TEST(Simulate, BinomialSumsBetweenOnePairOfRanksTakeTurnsOnTheirConnection) {
  // Chimera D=2 N=2, one replica: both stages (and the tied table) are summed between ranks 0
  // and 1, stage 1's from 3, stage 0's and the table's from 4. One connection moves its messages
  // in the order they were posted: stage 1 up 3-13, down 13-23; stage 0 up 13-23 (while stage 1
  // goes down), down 23-33; the table's empty messages after stage 0's on each direction.
  const SimResult r = simulate_binomial_sums(request("chimera", 2, 2), 1);
  expect_sum(r.allreduce[1], 3, 23);
  expect_sum(r.allreduce[0], 4, 33);
  expect_sum(r.tied, 4, 33);
  EXPECT_DOUBLE_EQ(r.iteration_time, 33);
}

TEST(Simulate, ABinomialSumsRankSendsOnceItHasStartedNotOnceAllHave) {
  // GPipe D=2 N=1, F=B=1, one replica: the tied table's sum runs between worker 1, whose
  // backward ends at 3, and worker 0, whose ends at 4. Worker 1's reduce message to worker 0
  // (link time 10) moves from 3, sent eagerly before its receiver has started: 3 to 13; the
  // broadcast back 13 to 23 (from 4 and 14, were every rank to start with the last).
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.tied_grad_bytes = 10;
  c.binomial_allreduce = true;
  const SimResult r = simulate(make_schedule(request("gpipe", 2, 1)), c);
  EXPECT_DOUBLE_EQ(r.tied.ready, 4);
  EXPECT_DOUBLE_EQ(r.tied.end, 23);
  EXPECT_DOUBLE_EQ(r.iteration_time, 23);
}

TEST(Simulate, ConcurrentSumsArePricedAsAnIterationsSums) {
  // What `chimera bench sums` sets beside its measurement: sums started together at 0, each
  // message of beta L = 10. One sum over four hosts: libnbc's tree, 5 beta L (as the case above).
  // Two sums over the same four hosts, two ranks on each: every message shares its links with
  // the other sum's, 10 beta L each. Two ranks of one host: through memory, host_alpha.
  Costs c;
  c.beta = 1;
  c.host_alpha = 0.5;
  const std::vector<int> own_host{0, 1, 2, 3};
  EXPECT_EQ(concurrent_sums_end({{{0, 1, 2, 3}, 10}}, own_host, c), (std::vector<double>{50}));
  const std::vector<int> two_per_host{0, 0, 1, 1, 2, 2, 3, 3};
  EXPECT_EQ(concurrent_sums_end({{{0, 2, 4, 6}, 10}, {{1, 3, 5, 7}, 10}}, two_per_host, c),
            (std::vector<double>{100, 100}));
  EXPECT_EQ(concurrent_sums_end({{{0, 1}, 10}}, two_per_host, c), (std::vector<double>{1}));
  EXPECT_THROW(concurrent_sums_end({{{0, 8}, 10}}, two_per_host, c), InputError);
}

TEST(Simulate, ALaterRankOfAHostWeighsLessOnItsLink) {
  // Two sums of two ranks over two hosts, two ranks on each (ranks 0, 1 on host 0; 2, 3 on host
  // 1): A = {0, 2}, B = {1, 3}, beta L = 10, both started at 0 (so the lower rank goes first).
  // Fair: both reduce messages (host 1 out, host 0 in) at half rate to 20, both broadcasts at
  // half rate to 40. Later ranks weighted 0.5: A's reduce at 2/3 to 15, B's at 1/3 to 15 and
  // alone to 20; A's broadcast alone 15-20, then with B's at 2/3 to 27.5; B's at 1/3 to 27.5 and
  // alone to 35.
  Costs c;
  c.beta = 1;
  const std::vector<int> two_per_host{0, 0, 1, 1};
  const std::vector<SumGroup> sums{{{0, 2}, 10}, {{1, 3}, 10}};
  EXPECT_EQ(concurrent_sums_end(sums, two_per_host, c), (std::vector<double>{40, 40}));
  c.later_rank_weight = 0.5;
  const std::vector<double> ends = concurrent_sums_end(sums, two_per_host, c);
  ASSERT_EQ(ends.size(), 2U);
  EXPECT_NEAR(ends[0], 27.5, 1e-9);
  EXPECT_NEAR(ends[1], 35, 1e-9);
  // One rank per host: the weight changes nothing (each link carries one rank's flows).
  const std::vector<int> own_host{0, 1, 2, 3};
  const std::vector<SumGroup> crossing{{{0, 1, 2, 3}, 10}, {{0, 2, 1, 3}, 10}};
  Costs fair;
  fair.beta = 1;
  EXPECT_EQ(concurrent_sums_end(crossing, own_host, c),
            concurrent_sums_end(crossing, own_host, fair));
  EXPECT_GT(concurrent_sums_end(crossing, own_host, fair)[1], 50);  // they do share links
}

TEST(Simulate, BinomialSumsWaitForThePipelinesMessagesOnALink) {
  // GPipe D=2 N=1 over W=2 replicas, a host per rank: stage 1's gradient is ready at 3, when its
  // input gradient (link time 5) starts down to stage 0 on its host's outgoing link, which stage
  // 1's reduce message needs too: the reduce moves from 8 to 18, the broadcast 18 to 28. Stage
  // 0's gradient is ready at 9: its sum ends at 29.
  const SimResult r = simulate_binomial_sums(request("gpipe", 2, 1), 2, 1, 5);
  expect_sum(r.allreduce[1], 3, 28);
  expect_sum(r.allreduce[0], 9, 29);
  EXPECT_DOUBLE_EQ(r.iteration_time, 29);
}

TEST(Simulate, TheSumsOfAHostsRanksShareItsLink) {
  // 1F1B D=2 N=2 W=2, F=B=1: stage 1's gradient is ready at 5 (worker 1), stage 0's at 6 (worker
  // 0); each sum over two replicas takes beta L = 10. On hosts of their own both run at once;
  // on one host (the replicas on two) stage 0's waits for stage 1's.
  Costs c = Costs::forward_backward(1, 1);
  c.beta = 1;
  c.stage_grad_bytes = 10;
  c.data_parallel = 2;
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  SimResult r = simulate(s, c);
  ASSERT_DOUBLE_EQ(r.allreduce[1].ready, 5);
  ASSERT_DOUBLE_EQ(r.allreduce[0].ready, 6);
  EXPECT_DOUBLE_EQ(r.iteration_time, 16);
  c.ranks_per_host = 2;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.allreduce[0].start, 15);
  EXPECT_DOUBLE_EQ(r.iteration_time, 25);
  // One replica: both holders of the tied table sit on one host and sum it in memory.
  c.data_parallel = 1;
  c.tied_grad_bytes = 100;
  c.host_beta = 0.01;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.tied.end - r.tied.start, 1);
}

TEST(Simulate, RanksPerHostMustDivideTheWorkers) {
  Costs c = Costs::forward_backward(1, 1);
  c.ranks_per_host = 3;
  EXPECT_THROW(simulate(make_schedule(request("1f1b", 4, 4)), c), InputError);
  c.ranks_per_host = 0;
  EXPECT_THROW(simulate(make_schedule(request("1f1b", 4, 4)), c), InputError);
}

TEST(Simulate, SingleReplicaSumsOnlyTheTiedTable) {
  Costs c = Costs::forward_backward(1, 1);
  c.alpha = 1;
  c.beta = 1;
  c.stage_grad_bytes = 1000;
  c.tied_grad_bytes = 10;
  const SimResult r = simulate(make_schedule(request("1f1b", 4, 4)), c);
  for (const StageAllreduce& a : r.allreduce) EXPECT_DOUBLE_EQ(a.end - a.start, 0) << a.stage;
  // The token table's two ends (workers 0 and 3) still sum it: 2 log2(2) alpha + 2 (1/2) beta L.
  EXPECT_EQ(r.tied.holders, (std::vector<int>{0, 3}));
  EXPECT_DOUBLE_EQ(r.tied.end - r.tied.start, 2 * 1 + 10);
  EXPECT_DOUBLE_EQ(r.allreduce_total, 12);
  // It starts when worker 0 ran its last backward of stage 0, the program's last op.
  EXPECT_DOUBLE_EQ(r.tied.ready, r.makespan);
  EXPECT_DOUBLE_EQ(r.iteration_time, r.makespan + 12);
}

TEST(Simulate, PricesTheProgramNotTheOpsAlone) {
  // A forward-only schedule has no sums: its iteration is its makespan.
  Costs c = Costs::forward_backward(1, 2);
  c.alpha = 1;
  c.tied_grad_bytes = 10;
  const SimResult r = simulate(forward_only(make_schedule(request("1f1b", 4, 4))), c);
  EXPECT_TRUE(r.tied.holders.empty());
  EXPECT_DOUBLE_EQ(r.iteration_time, r.makespan);
  // The last worker's first F starts after 3 hops of F + alpha; its 4 F ops then run back to
  // back (each next activation was sent while it computed).
  EXPECT_DOUBLE_EQ(r.makespan, 3 * (1 + 1) + 4 * 1);
}

TEST(Simulate, TimelineRespectsOrderAndDependencies) {
  for (const char* scheme : {"1f1b", "chimera", "zb-h1", "gems"}) {
    const Schedule s = make_schedule(request(scheme, 6, 12));
    const SimResult r = simulate(s, Costs::forward_backward(1, 2));
    std::map<std::tuple<int, int, int>, double> forward_end;  // (pipe, stage, mb)
    for (int w = 0; w < s.workers; ++w) {
      for (std::size_t k = 0; k < r.timeline[w].size(); ++k) {
        const OpSpan& span = r.timeline[w][k];
        if (k > 0) {
          ASSERT_GE(span.start, r.timeline[w][k - 1].end) << scheme;
        }
        const Op& op = s.ops[w][span.op];
        if (op.kind == OpKind::F) {
          for (int m : op.mbs) forward_end[{op.pipe, op.stage, m}] = span.end;
        }
      }
    }
    for (int w = 0; w < s.workers; ++w) {
      for (const OpSpan& span : r.timeline[w]) {
        const Op& op = s.ops[w][span.op];
        if (op.kind == OpKind::F && op.stage > 0) {
          ASSERT_GE(span.start, forward_end.at({op.pipe, op.stage - 1, op.mbs[0]})) << scheme;
        }
      }
    }
  }
}

TEST(Simulate, HalvingKeepsActivationsAtTheUnitLevelDoublingDoublesThem) {
  for (int D : {4, 8, 16}) {
    for (int N : {2 * D, 4 * D}) {
      const Costs c = Costs::forward_backward(1, 2);
      const auto peak = [&](const char* variant) {
        const SimResult r = simulate(make_schedule(request("chimera", D, N, variant)), c);
        return *std::max_element(r.peak_activations.begin(), r.peak_activations.end());
      };
      EXPECT_DOUBLE_EQ(peak("direct"), D) << D << " " << N;
      EXPECT_DOUBLE_EQ(peak("halving"), D) << D << " " << N;
      EXPECT_DOUBLE_EQ(peak("doubling"), 2 * D) << D << " " << N;
    }
  }
}

TEST(Simulate, SimulatorIsReusable) {
  const Schedule s = make_schedule(request("chimera", 8, 16));
  const Simulator sim(s);
  for (double b : {1.0, 2.0, 3.0}) {
    const Costs c = Costs::forward_backward(1, b);
    EXPECT_DOUBLE_EQ(sim.run(c).makespan, simulate(s, c).makespan);
  }
}

TEST(Simulate, RefusesInvalidCosts) {
  const Simulator sim(make_schedule(request("1f1b", 2, 2)));
  Costs c = Costs::forward_backward(-1, 1);
  EXPECT_THROW(sim.run(c), InputError);
  c = Costs::forward_backward(1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_THROW(sim.run(c), InputError);
  c = Costs::forward_backward(1, 1);
  c.data_parallel = 0;
  EXPECT_THROW(sim.run(c), InputError);
}

}  // namespace
}  // namespace chimera::schedule
