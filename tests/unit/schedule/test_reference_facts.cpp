// The reference facts of docs/DESIGN.md §3, reproduced exactly.
#include <gtest/gtest.h>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/render.hpp"
#include "chimera/schedule/simulate.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::grid_cells;
using testing::request;
using testing::unit_costs;

const std::vector<int> kDepths = {2, 4, 6, 8, 16, 32};

TEST(ReferenceFacts, ChimeraGridForFourStagesAndFourMicroBatches) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const Costs costs = unit_costs();
  const std::vector<std::vector<std::string>> expected = {
      {"F0d0", ".", "F1d0", "F2u3", "B2u3", "F3u3", "B3u3", "B0d0", ".", "B1d0"},
      {".", "F0d1", "F2u2", "F1d1", "F3u2", "B2u2", "B0d1", "B3u2", "B1d1", "."},
      {".", "F2u1", "F0d2", "F3u1", "F1d2", "B0d2", "B2u1", "B1d2", "B3u1", "."},
      {"F2u0", ".", "F3u0", "F0d3", "B0d3", "F1d3", "B1d3", "B2u0", ".", "B3u0"},
  };
  EXPECT_EQ(grid_cells(render_grid(s, simulate(s, costs), costs)), expected);
}

TEST(ReferenceFacts, IdleSlotsPerWorker) {
  for (int D : kDepths) {
    for (int N : {D, 2 * D, 4 * D}) {
      const SimResult chimera = simulate(make_schedule(request("chimera", D, N)), unit_costs());
      for (double idle : chimera.idle) EXPECT_EQ(idle, D - 2) << "chimera D=" << D << " N=" << N;
      for (const char* scheme : {"gpipe", "1f1b"}) {
        const SimResult r = simulate(make_schedule(request(scheme, D, N)), unit_costs());
        for (double idle : r.idle) EXPECT_EQ(idle, 2 * (D - 1)) << scheme << " D=" << D;
      }
    }
  }
}

TEST(ReferenceFacts, BubbleRatioFormulas) {
  for (int D : kDepths) {
    for (int N : {D, 2 * D, 8 * D}) {
      const double chimera =
          simulate(make_schedule(request("chimera", D, N)), unit_costs()).bubble_ratio;
      EXPECT_DOUBLE_EQ(chimera, static_cast<double>(D - 2) / (2 * N + D - 2)) << D << " " << N;
      for (const char* scheme : {"gpipe", "1f1b"}) {
        const double r = simulate(make_schedule(request(scheme, D, N)), unit_costs()).bubble_ratio;
        EXPECT_DOUBLE_EQ(r, static_cast<double>(D - 1) / (N + D - 1)) << scheme << " " << D;
      }
    }
  }
}

TEST(ReferenceFacts, ChimeraPeakActivationsForEightStages) {
  const SimResult r = simulate(make_schedule(request("chimera", 8, 8)), unit_costs());
  EXPECT_EQ(r.peak_activations, (std::vector<double>{5, 6, 7, 8, 8, 7, 6, 5}));
}

TEST(ReferenceFacts, WeightCopiesPerWorker) {
  const std::vector<std::pair<ScheduleRequest, double>> cases = {
      {request("chimera", 8, 8), 2},
      {request("gems", 8, 8), 2},
      {request("gpipe", 8, 8), 1},
      {request("1f1b", 8, 8), 1},
      {request("chimera", 8, 8, "direct", 4), 4},
      {request("chimera", 8, 8, "direct", 8), 8},
  };
  for (const auto& [req, copies] : cases) {
    const SimResult r = simulate(make_schedule(req), unit_costs());
    for (double c : r.weight_copies) EXPECT_EQ(c, copies) << req.scheme << " pipes " << req.pipes;
  }
}

TEST(ReferenceFacts, ChimeraIterationTimeWithBackwardTwiceForward) {
  for (int D : kDepths) {
    const int N = D;
    for (double F : {1.0, 1.5}) {
      const double B = 2 * F;
      const SimResult r =
          simulate(make_schedule(request("chimera", D, N)), Costs::forward_backward(F, B));
      EXPECT_DOUBLE_EQ(r.makespan, (N + D / 2 - 1) * (F + B) + (D / 2 - 1) * F) << "D=" << D;
    }
  }
}

TEST(ReferenceFacts, MorePipesLeaveFewerIdleSlots) {
  for (int D : kDepths) {
    for (int f = 1; f <= D / 2; ++f) {
      if ((D / 2) % f != 0) continue;
      for (int N : {D, 4 * D}) {
        const SimResult r =
            simulate(make_schedule(request("chimera", D, N, "direct", 2 * f)), unit_costs());
        for (double idle : r.idle) {
          EXPECT_EQ(idle, D / f - 2) << "D=" << D << " f=" << f << " N=" << N;
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::schedule
