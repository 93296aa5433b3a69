// chimera-zb: Chimera's two pipelines with split backward and W ops filling the bubbles. Its
// closed form at F = I = W = 1 (F:B = 1:2, I = W = B/2): every worker idles D/2 - 1 slots, so
// the makespan is 3N + D/2 - 1. That is optimal for Chimera's placement at these costs: worker
// D/2 - 1's first op is the F of down stage D/2 - 1 or up stage D/2, which needs D/2 - 1 forwards
// before it, and no W can run before the worker's first I; after that the worker has 3N of work.
#include <gtest/gtest.h>

#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

Costs split_costs() {
  return Costs::parse("1:2:1");  // F = 1, B = 2, I = W = 1
}

double peak(const SimResult& r) {
  return *std::max_element(r.peak_activations.begin(), r.peak_activations.end());
}

TEST(ChimeraZb, IdlesHalfOfChimerasSlotsPerWorker) {
  for (const int D : {2, 4, 6, 8, 12, 16}) {
    for (const int k : {1, 2, 3}) {
      const int N = k * D;
      const Schedule s = make_schedule(request("chimera-zb", D, N));
      const SimResult r = simulate(s, split_costs());
      EXPECT_DOUBLE_EQ(r.makespan, 3 * N + D / 2 - 1) << "D=" << D << " N=" << N;
      for (const double idle : r.idle) EXPECT_DOUBLE_EQ(idle, D / 2 - 1) << "D=" << D;
      // Chimera direct, priced the same way, idles more than its D - 2 unit slots.
      const SimResult chimera = simulate(make_schedule(request("chimera", D, N)), split_costs());
      EXPECT_LE(r.makespan, chimera.makespan) << "D=" << D << " N=" << N;
      EXPECT_LE(peak(r), D) << "D=" << D << " N=" << N;
    }
  }
}

TEST(ChimeraZb, BeatsChimeraAndZbH1AtTwiceDWithAtMostDInFlight) {
  for (const int D : {4, 8, 16}) {
    const int N = 2 * D;
    const SimResult zb = simulate(make_schedule(request("chimera-zb", D, N)), split_costs());
    EXPECT_LE(peak(zb), D);
    for (const ScheduleRequest& other :
         {request("zb-h1", D, N), request("chimera", D, N, "direct"),
          request("chimera", D, N, "doubling"), request("chimera", D, N, "halving"),
          request("1f1b", D, N)}) {
      const SimResult r = simulate(make_schedule(other), split_costs());
      EXPECT_LT(zb.makespan, r.makespan) << other.scheme << " " << other.variant << " D=" << D;
    }
  }
  // The table at D = 8, N = 16: ZB-H1 55, Chimera doubling 60, direct 66, 1F1B 69.
  EXPECT_DOUBLE_EQ(simulate(make_schedule(request("chimera-zb", 8, 16)), split_costs()).makespan,
                   51);
}

// Deadlock-free with the runtime's eager sends. With rendezvous sends it is not: a W placed
// between two F ops delays the receive lowering posts for the second F by one op, and the first
// and second workers then each wait for the other to post (the verifier names the cycle).
TEST(ChimeraZb, IsDeadlockFreeWithEagerSendsNotWithRendezvous) {
  for (const int D : {2, 4, 8}) {
    const Schedule s = make_schedule(request("chimera-zb", D, 2 * D));
    EXPECT_TRUE(check(s, Semantics::Eager).ok);
    // Every backward is split: 2N I's and W's per worker (one per micro-batch and held stage).
    for (const auto& ops : s.ops) {
      auto count = [&](OpKind k) {
        return std::count_if(ops.begin(), ops.end(), [&](const Op& op) { return op.kind == k; });
      };
      EXPECT_EQ(count(OpKind::B), 0);
      EXPECT_EQ(count(OpKind::I), 2 * D);
      EXPECT_EQ(count(OpKind::W), 2 * D);
    }
  }
  const VerifyResult rendezvous =
      check(make_schedule(request("chimera-zb", 4, 8)), Semantics::Rendezvous);
  EXPECT_FALSE(rendezvous.ok);
  EXPECT_NE(rendezvous.problem.find("worker 0 op 11 (F3d0) waits for worker 1 op 12 (W5u2)"),
            std::string::npos)
      << rendezvous.problem;
}

TEST(ChimeraZb, MemoryKnobIsHonouredAndRefusedBelowChimerasPeak) {
  ScheduleRequest r = request("chimera-zb", 8, 16);
  // The knob counts chunk-activations (1/(2D) of the model), the peaks stage-units of two chunks.
  r.max_in_flight = 24;  // room to defer more W ops: never above the cap, never slower
  const SimResult loose = simulate(make_schedule(r), split_costs());
  EXPECT_LE(peak(loose), 12);
  EXPECT_DOUBLE_EQ(loose.makespan, 51);
  r.max_in_flight = 15;
  try {
    make_schedule(r);
    ADD_FAILURE() << "a cap below Chimera's own peak was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needs max_in_flight >= 16"), std::string::npos)
        << e.what();
  }
  ScheduleRequest other = request("1f1b", 4, 4);
  other.max_in_flight = 4;
  EXPECT_THROW(make_schedule(other), InputError);  // chimera-zb's knob only
}

TEST(ChimeraZb, RefusesWhatChimeraDirectRefuses) {
  EXPECT_THROW(make_schedule(request("chimera-zb", 5, 10)), InputError);  // odd D
  EXPECT_THROW(make_schedule(request("chimera-zb", 4, 6)), InputError);   // N not a multiple of D
  EXPECT_THROW(make_schedule(request("chimera-zb", 4, 8, "doubling")), InputError);
}

}  // namespace
}  // namespace chimera::schedule
