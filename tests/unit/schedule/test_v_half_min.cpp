// V-Half and V-Min against the targets of the paper's reference generator, in its units: with
// F = I = W = 1 per chunk (1/(2D) of the model), a chunk op is one slot and a chunk's activation
// one unit. The simulator's units are 1/D of the model: a chunk op costs 1/2 with F = I = W = 1,
// and a chunk's activation counts 1/2, so a target of T slots is T/2 here and a peak of k chunks
// k/2 ("stage-units").
#include <gtest/gtest.h>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;
using testing::unit_split;

double chunks(double stage_units) {
  return 2 * stage_units;
}

// D = 4, N = 8: V-Half 53 slots with 6 chunks' activations at most on every worker, V-Min 59
// with 4; 1F1B in the same units (a stage is 2 chunks: F = I = W = 2 slots) idles 18 slots per
// worker and holds 8 chunks' activations on its first worker.
TEST(VHalfMin, ReferenceTargetsAtFourWorkers) {
  const SimResult half = simulate(make_schedule(request("v-half", 4, 8)), unit_split());
  EXPECT_DOUBLE_EQ(chunks(half.makespan), 53);
  for (double p : half.peak_activations) EXPECT_DOUBLE_EQ(chunks(p), 6);

  const SimResult min = simulate(make_schedule(request("v-min", 4, 8)), unit_split());
  EXPECT_DOUBLE_EQ(chunks(min.makespan), 59);
  for (double p : min.peak_activations) EXPECT_DOUBLE_EQ(chunks(p), 4);

  const SimResult fb = simulate(make_schedule(request("1f1b", 4, 8)), unit_split());
  for (double idle : fb.idle) EXPECT_DOUBLE_EQ(chunks(idle), 18);
  EXPECT_DOUBLE_EQ(chunks(fb.peak_activations[0]), 8);
}

// The highest peak of any worker: (p+2)//2 stage-units for V-Half, (p+4)//3 for V-Min (1F1B:
// p), for p = 3..8, at N = 3p (enough micro-batches to reach the steady pattern).
TEST(VHalfMin, PeakIsAHalfAndAThirdOfOneFOneB) {
  for (int p = 3; p <= 8; ++p) {
    const int N = 3 * p;
    const SimResult half = simulate(make_schedule(request("v-half", p, N)), unit_split());
    const SimResult min = simulate(make_schedule(request("v-min", p, N)), unit_split());
    const auto most = [](const SimResult& r) {
      return *std::max_element(r.peak_activations.begin(), r.peak_activations.end());
    };
    EXPECT_DOUBLE_EQ(most(half), (p + 2) / 2) << "v-half p=" << p;
    EXPECT_DOUBLE_EQ(most(min), (p + 4) / 3) << "v-min p=" << p;
  }
}

// V-Half's idle time per worker does not grow with N: 6*floor((p-1)/2) - 1 slots.
TEST(VHalfMin, HalfIdleIsConstantInN) {
  for (int p = 3; p <= 8; ++p) {
    for (int N : {2 * p, 3 * p, 4 * p + 1, 6 * p}) {
      const SimResult r = simulate(make_schedule(request("v-half", p, N)), unit_split());
      const double idle = 6 * ((p - 1) / 2) - 1;
      EXPECT_DOUBLE_EQ(chunks(r.makespan) - 6.0 * N, idle) << "p=" << p << " N=" << N;
    }
  }
}

// Every shape gives a complete schedule, deadlock-free with eager sends (the runtime's).
TEST(VHalfMin, EveryShapeVerifies) {
  for (const char* scheme : {"v-half", "v-min"}) {
    for (int D = 2; D <= 9; ++D) {
      for (int N = 1; N <= 3 * D + 2; ++N) {
        const VerifyResult r = check(make_schedule(request(scheme, D, N)), Semantics::Eager);
        EXPECT_TRUE(r.ok) << scheme << " D=" << D << " N=" << N << ": " << r.problem;
      }
    }
  }
}

// With rendezvous sends, like zb-v and dualpipev, they are not: neighbours on the V send each
// other a forward one way and a gradient the other before posting each other's receives. The
// verifier names the cycle instead of hanging.
TEST(VHalfMin, RendezvousVerdictNamesTheCycle) {
  for (const char* scheme : {"v-half", "v-min", "zb-v"}) {
    const VerifyResult r = check(make_schedule(request(scheme, 4, 8)), Semantics::Rendezvous);
    EXPECT_FALSE(r.ok) << scheme;
    EXPECT_NE(r.problem.find("deadlock with rendezvous sends: cyclic wait: worker"),
              std::string::npos)
        << scheme << ": " << r.problem;
  }
}

}  // namespace
}  // namespace chimera::schedule
