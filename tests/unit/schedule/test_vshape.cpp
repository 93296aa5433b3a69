// The V-shaped schedules, zb-v and dualpipev: placement, op order, makespan and peak activations
// against values derived by hand, the bubble against zb-h1's, and send semantics.
#include <gtest/gtest.h>

#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;
using testing::unit_split;

std::string order(const Schedule& s, int worker) {
  std::ostringstream out;
  for (const Op& op : s.ops[worker]) out << (out.tellp() > 0 ? " " : "") << op_label(s, op);
  return out.str();
}

TEST(VShape, WorkerHoldsStageAndItsMirror) {
  for (const char* scheme : {"zb-v", "dualpipev"}) {
    const Schedule s = make_schedule(request(scheme, 4, 8));
    EXPECT_EQ(s.stages, 8) << scheme;
    ASSERT_EQ(s.pipes(), 1) << scheme;
    EXPECT_EQ(s.placement[0], (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0})) << scheme;
  }
}

// Worker D-1 holds stages D-1 and D: their hand-off is local, so no message names it, and every
// other stage boundary crosses workers once per micro-batch and direction.
TEST(VShape, TurnIsALocalHandOff) {
  const int D = 4;
  const int N = 8;
  for (const char* scheme : {"zb-v", "dualpipev"}) {
    const Schedule s = make_schedule(request(scheme, D, N));
    int sends = 0;
    for (const auto& program : lower(s).workers) {
      for (const Instr& in : program) {
        if (in.kind != InstrKind::Send) continue;
        ++sends;
        EXPECT_NE(in.msg.src, in.msg.dst) << scheme;
        const int boundary =
            in.msg.payload == Payload::Activation ? in.msg.stage : in.msg.stage - 1;
        EXPECT_NE(boundary, D - 1) << scheme << ": the turn of the V sent a message";
      }
    }
    EXPECT_EQ(sends, 2 * N * (2 * D - 2)) << scheme;
  }
}

// zb-v with F = I = W: worker D-1 receives its first input after the D-1 forwards above it,
// (D-1)/2, and then has 2N ops of each kind at 1/2 each, 3N of work, so no schedule on this
// placement takes less than 3N + (D-1)/2 (zb-h1: 3N + D-1). Up to D = 4 the greedy reaches it for
// every N >= D: worker D-1 never idles once its first input is there. Beyond, it can end a few
// slots later (the last micro-batch's gradient has 2D stages to cross after its last forward, and
// the memory bound delays that forward), but always stays below zb-h1.
// Peak: each worker may hold 2D chunks' activations (1/2 each), and the warm-up reaches it.
TEST(ZbV, UnitMakespanAndPeak) {
  for (int D : {2, 3, 4, 5, 6, 8, 12, 16}) {
    for (int N : {D, D + 1, 2 * D, 3 * D + 1}) {
      const SimResult r = simulate(make_schedule(request("zb-v", D, N)), unit_split());
      const double bound = 3.0 * N + (D - 1) / 2.0;
      if (D <= 4) {
        EXPECT_DOUBLE_EQ(r.makespan, bound) << "D=" << D << " N=" << N;
      } else {
        EXPECT_GE(r.makespan, bound) << "D=" << D << " N=" << N;
        EXPECT_LT(r.makespan, 3.0 * N + D - 1) << "D=" << D << " N=" << N;
      }
      for (int w = 0; w < D; ++w) EXPECT_DOUBLE_EQ(r.peak_activations[w], D) << "D=" << D;
    }
  }
}

// One micro-batch through D = 2 (one slot = 1/2): F at stages 0,1,2,3 in slots 0-3 (workers
// 0,1,1,0), I at stages 3,2,1,0 in slots 4-7; worker 0 runs W3 in slot 5 and W0 in slot 8,
// worker 1 W2 and W1 in slots 7 and 8 (its I1 comes first): 9 slots, 4.5. Each worker holds its
// two stages' activations, 2 x 1/2.
TEST(ZbV, OneMicroBatchByHand) {
  const Schedule s = make_schedule(request("zb-v", 2, 1));
  EXPECT_EQ(order(s, 0), "F0d0 F0d3 I0d3 W0d3 I0d0 W0d0");
  EXPECT_EQ(order(s, 1), "F0d1 F0d2 I0d2 I0d1 W0d2 W0d1");
  const SimResult r = simulate(s, unit_split());
  EXPECT_DOUBLE_EQ(r.makespan, 4.5);
  EXPECT_EQ(r.peak_activations, (std::vector<double>{1, 1}));
}

// Worker w forwards chunk 0 until chunk 1 of micro-batch 0 comes back to it: 2(D-1-w) slots for
// it to go down and back up, plus the slot it left in.
TEST(ZbV, WarmUpForwardsChunkZeroUntilTheVComesBack) {
  const int D = 4;
  const Schedule s = make_schedule(request("zb-v", D, 4 * D));
  for (int w = 0; w < D; ++w) {
    int warm_up = 0;
    while (s.ops[w][warm_up].kind == OpKind::F && s.ops[w][warm_up].stage == w) ++warm_up;
    EXPECT_EQ(warm_up, 2 * (D - 1 - w) + 1) << "worker " << w;
    EXPECT_EQ(s.ops[w][warm_up].stage, 2 * D - 1 - w) << "worker " << w;
  }
}

// ZB-V's point: with I = W = B/2 its bubble is below zb-h1's at the same peak memory.
TEST(ZbV, BubbleBelowZbH1) {
  for (double b : {1.0, 2.0}) {
    const Costs c = Costs::forward_backward(1, b);
    for (int D : {4, 8}) {
      const SimResult v = simulate(make_schedule(request("zb-v", D, 2 * D)), c);
      const SimResult h1 = simulate(make_schedule(request("zb-h1", D, 2 * D)), c);
      EXPECT_LT(v.bubble_ratio, h1.bubble_ratio) << "D=" << D << " B=" << b;
      EXPECT_LE(v.peak_activations, h1.peak_activations) << "D=" << D << " B=" << b;
    }
  }
}

// Every D >= 2 and N >= 1 gives a complete, deadlock-free schedule.
TEST(ZbV, EveryShapeVerifies) {
  for (int D = 2; D <= 9; ++D) {
    for (int N = 1; N <= 3 * D + 2; ++N) {
      const VerifyResult r = check(make_schedule(request("zb-v", D, N)));
      EXPECT_TRUE(r.ok) << "D=" << D << " N=" << N << ": " << r.problem;
    }
  }
}

// DualPipeV's phases for D = 2, N = 4, written out by hand (d3 = worker 0's chunk 1):
// worker 0: 1. F0,F1 (chunk 0)  2. F2, F0d3  3. I0d3 W0d3 F1d3  4. F3 B1d3 F2d3 B0d0
//   5. B2d3 F3d3 B1d0  6. B3d3, then (the split starts at pair 0, before chunk 0 on an even
//   worker) I2d0  7. W2d0 I3d0  8. W3d0.
// worker 1: 2. F0d1 F0d2 F1d1 F1d2  4. twice (F chunk 0, B chunk 1, F chunk 1, B chunk 0)
//   6. B2d2 B2d1, then (split from pair 1, before chunk 1 on an odd worker) I3d2 I3d1  8. W's.
TEST(DualPipeV, PhasesByHand) {
  const Schedule s = make_schedule(request("dualpipev", 2, 4));
  EXPECT_EQ(order(s, 0),
            "F0d0 F1d0 F2d0 F0d3 I0d3 W0d3 F1d3 F3d0 B1d3 F2d3 B0d0 B2d3 F3d3 B1d0 B3d3 I2d0 "
            "W2d0 I3d0 W3d0");
  EXPECT_EQ(order(s, 1),
            "F0d1 F0d2 F1d1 F1d2 F2d1 B0d2 F2d2 B0d1 F3d1 B1d2 F3d2 B1d1 B2d2 B2d1 I3d2 I3d1 "
            "W3d2 W3d1");
}

// With F = I = W the F&B pairs keep worker D-1 busy from its first input, (D-1)/2, on: 3N +
// (D-1)/2, as zb-v. Peak: when phase 4 starts, worker r has run 2D-1-r chunk-0 and D chunk-1
// forwards and freed D-1-r of them (phase 3's W's) — 2D chunks — and the pair's forward comes
// before its backward: 2D+1 chunks of 1/2, one more than zb-v (DualPipe's "PP+1").
TEST(DualPipeV, UnitMakespanAndPeak) {
  for (int D : {2, 3, 4, 8}) {
    for (int N : {2 * D, 2 * D + 1, 4 * D}) {
      const SimResult r = simulate(make_schedule(request("dualpipev", D, N)), unit_split());
      EXPECT_DOUBLE_EQ(r.makespan, 3.0 * N + (D - 1) / 2.0) << "D=" << D << " N=" << N;
      for (int w = 0; w < D; ++w) EXPECT_DOUBLE_EQ(r.peak_activations[w], D + 0.5) << "D=" << D;
    }
  }
}

TEST(DualPipeV, NeedsTwoMicroBatchesPerStage) {
  for (int D : {2, 4, 8}) {
    EXPECT_NO_THROW(make_schedule(request("dualpipev", D, 2 * D)));
    try {
      make_schedule(request("dualpipev", D, 2 * D - 1));
      ADD_FAILURE() << "dualpipev D=" << D << " N=" << 2 * D - 1 << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("dualpipev needs N >= 2D"), std::string::npos)
          << e.what();
    }
  }
}

// Both run with eager sends (the runtime's). With rendezvous sends neighbours exchange in both
// directions — a forward one way, a gradient the other — before posting each other's receives,
// as Megatron's interleaved order does, so both deadlock once the steady state is reached.
TEST(VShape, SendSemantics) {
  for (const char* scheme : {"zb-v", "dualpipev"}) {
    for (int D : {2, 4, 8}) {
      for (int N : {2 * D, 4 * D}) {
        const Schedule s = make_schedule(request(scheme, D, N));
        EXPECT_TRUE(check(s, Semantics::Eager).ok) << scheme << " D=" << D << " N=" << N;
        const VerifyResult r = check(s, Semantics::Rendezvous);
        EXPECT_FALSE(r.ok) << scheme << " D=" << D << " N=" << N;
        EXPECT_EQ(r.problem.rfind("deadlock with rendezvous sends: cyclic wait", 0), 0U)
            << r.problem;
      }
    }
  }
}

}  // namespace
}  // namespace chimera::schedule
