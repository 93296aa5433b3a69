// Deadlock freedom under stated send semantics (verify.hpp): hand-made deadlocks are reported as
// a shortest cyclic wait, op by op; eager and rendezvous sends differ where a worker sends before
// it posts the receive of its peer's message.
#include <gtest/gtest.h>

#include <string>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

Op f(int pipe, int stage, int mb) {
  return {OpKind::F, pipe, stage, {mb}};
}

// A ring of forward-only pipes: pipe p runs stage 0 on worker p and stage 1 on worker p+1, one
// micro-batch (p) each. `receive_first`: every worker first runs stage 1 of its left neighbour's
// micro-batch, which needs that neighbour's stage 0, queued after its own stage 1.
Schedule ring(int workers, bool receive_first) {
  Schedule s;
  s.scheme = "hand";
  s.workers = workers;
  s.stages = 2;
  s.schedule_micro_batches = workers;
  s.forward_only = true;
  for (int p = 0; p < workers; ++p) {
    s.placement.push_back({p, (p + 1) % workers});
    s.pipe_of.push_back(p);
  }
  s.ops.resize(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    const int left = (w + workers - 1) % workers;
    s.ops[w] = {f(w, 0, w), f(left, 1, left)};
    if (receive_first) std::swap(s.ops[w][0], s.ops[w][1]);
  }
  return s;
}

TEST(Deadlock, TwoWorkersEachReceivingFirst) {
  for (Semantics sem : {Semantics::Eager, Semantics::Rendezvous}) {
    const VerifyResult r = check(ring(2, true), sem);
    ASSERT_FALSE(r.ok) << semantics_name(sem);
    EXPECT_EQ(r.problem,
              "deadlock: cyclic wait: worker 0 op 0 (F1u1) waits for worker 1 op 1 (F1u0) "
              "(activation of stage 0, micro-batch 1), which waits for worker 1 op 0 (F0d1) "
              "(program order), which waits for worker 0 op 1 (F0d0) (activation of stage 0, "
              "micro-batch 0), which waits for worker 0 op 0 (F1u1) (program order)");
  }
}

TEST(Deadlock, ThreeWorkerCycleIsReportedWhole) {
  const VerifyResult r = check(ring(3, true));
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.problem.rfind("deadlock: cyclic wait: worker 0 op 0 ", 0), 0U) << r.problem;
  for (const char* step :
       {"waits for worker 2 op 1", "waits for worker 2 op 0", "waits for worker 1 op 1",
        "waits for worker 1 op 0", "waits for worker 0 op 1", "waits for worker 0 op 0"}) {
    EXPECT_NE(r.problem.find(step), std::string::npos) << step << ": " << r.problem;
  }
  EXPECT_NE(r.problem.find("(activation of stage 0, micro-batch 2)"), std::string::npos)
      << r.problem;
  EXPECT_EQ(r.problem.find('\n'), std::string::npos);
}

std::size_t count_waits(const std::string& text) {
  std::size_t waits = 0;
  for (std::size_t at = text.find("waits for"); at != std::string::npos;
       at = text.find("waits for", at + 1)) {
    ++waits;
  }
  return waits;
}

TEST(Deadlock, TheShortestCycleIsTheOneReported) {
  // The 3-worker ring (8 waits, worker 0 holding a third op), and through worker 0's middle op a
  // 2-worker ring with worker 1 (5 waits): the shorter one is reported.
  Schedule s = ring(3, true);
  s.placement.push_back({1, 0});
  s.pipe_of.push_back(3);
  s.schedule_micro_batches = 4;
  s.ops[0] = {f(2, 1, 2), f(3, 1, 3), f(0, 0, 0)};
  s.ops[1].push_back(f(3, 0, 3));
  const VerifyResult r = check(s);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.problem.rfind("deadlock: cyclic wait: worker 0 op 1 ", 0), 0U) << r.problem;
  EXPECT_EQ(count_waits(r.problem), 5U) << r.problem;
  EXPECT_EQ(r.problem.find("worker 2"), std::string::npos) << r.problem;
  // Long cycles are elided in the middle, still one line.
  const VerifyResult five = check(ring(5, true));
  ASSERT_FALSE(five.ok);
  EXPECT_NE(five.problem.find("which waits for ... (2 more)"), std::string::npos) << five.problem;
}

TEST(Deadlock, SendingBeforePostingDeadlocksOnlyWithRendezvous) {
  // Two micro-batches per pipe: each worker runs stage 0 of both its own (sending each to the
  // other worker) before stage 1 of the other's. Receives are posted one op ahead, so the receive
  // of the first message arrives in op 1's turn, after the worker's own first send.
  Schedule s = ring(2, false);
  s.schedule_micro_batches = 4;
  s.pipe_of = {0, 1, 0, 1};
  s.ops[0] = {f(0, 0, 0), f(0, 0, 2), f(1, 1, 1), f(1, 1, 3)};
  s.ops[1] = {f(1, 0, 1), f(1, 0, 3), f(0, 1, 0), f(0, 1, 2)};
  ASSERT_TRUE(check(s, Semantics::Eager).ok) << check(s, Semantics::Eager).problem;
  EXPECT_TRUE(check(s).ok);
  const VerifyResult r = check(s, Semantics::Rendezvous);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.problem,
            "deadlock with rendezvous sends: cyclic wait: worker 0 op 0 (F0d0) waits for worker "
            "1 op 1 (F3u0) (its send of activation of stage 0, micro-batch 0 completes only when "
            "worker 1 has posted the receive, in op 1's turn), which waits for worker 1 op 0 "
            "(F1u0) (program order), which waits for worker 0 op 1 (F2d0) (its send of "
            "activation of stage 0, micro-batch 1 completes only when worker 0 has posted the "
            "receive, in op 1's turn), which waits for worker 0 op 0 (F0d0) (program order)");
}

TEST(Deadlock, RendezvousAcceptsWhatPostsEarlyEnough) {
  // One micro-batch per pipe: the receive of op 1 is posted at the start, before any send.
  EXPECT_TRUE(check(ring(2, false), Semantics::Rendezvous).ok);
  for (const ScheduleRequest& r :
       {request("gpipe", 4, 8), request("1f1b", 4, 8), request("zb-h1", 4, 8),
        request("gems", 4, 8), request("chimera", 8, 16), request("chimera", 4, 8, "halving"),
        request("interleaved", 4, 4)}) {
    const VerifyResult result = check(make_schedule(r), Semantics::Rendezvous);
    EXPECT_TRUE(result.ok) << r.scheme << ": " << result.problem;
  }
  // Megatron's interleaved order with N > D: in steady state every worker sends a gradient to
  // its left neighbour before posting the receive of the one coming from its right — a ring.
  // (Megatron pairs such sends and receives in one batched call; our runtime's sends are eager.)
  const VerifyResult r = check(make_schedule(request("interleaved", 4, 8)), Semantics::Rendezvous);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.problem.rfind("deadlock with rendezvous sends: cyclic wait: worker 0 op 11 (B0d4) "
                            "waits for worker 3 op 12 (F4d3) (its send of gradient of stage 4",
                            0),
            0U)
      << r.problem;
}

}  // namespace
}  // namespace chimera::schedule
