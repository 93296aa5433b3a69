#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "chimera/core/error.hpp"
#include "chimera/plan/planner.hpp"
#include "plan_testing.hpp"

namespace chimera::plan {
namespace {

Predictor predictor(double f, double b, double memory = 1e12) {
  return Predictor(testing::small_model(), testing::emulated(f, b, {}, memory));
}

PlanRequest request_for(int nodes, int global_batch, int max_micro_batch_size) {
  PlanRequest request;
  request.nodes = nodes;
  request.global_batch = global_batch;
  request.max_micro_batch_size = max_micro_batch_size;
  return request;
}

TEST(Planner, EveryRankedLayoutIsValidAndSortedFastestFirst) {
  Predictor predict = predictor(1, 2);
  const PlanRequest request = request_for(8, 32, 4);
  const PlanResult r = plan(request, predict);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.layouts, r.invalid + r.over_memory + static_cast<int>(r.ranked.size()));
  EXPECT_GT(r.invalid, 0);  // e.g. chimera doubling with N < 2D
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const Prediction& p = r.ranked[i];
    EXPECT_EQ(p.layout.nodes(), 8);
    EXPECT_EQ(p.layout.global_batch(), 32);
    EXPECT_LE(p.layout.B, 4);
    EXPECT_TRUE(p.fits);
    if (i > 0) {
      EXPECT_LE(r.ranked[i - 1].iteration_ms, p.iteration_ms);
    }
  }
  // Recomputation only adds work when memory is plentiful.
  EXPECT_FALSE(r.ranked.front().layout.recompute);
}

TEST(Planner, ExplainNamesTheWinnerAndWhereItGains) {
  Predictor predict = predictor(1, 1);
  PlanRequest request = request_for(4, 4, 1);
  request.schemes = {parse_scheme_choice("chimera"), parse_scheme_choice("1f1b")};
  const PlanResult r = plan(request, predict);
  const std::vector<Prediction> best = best_per_scheme(r);
  ASSERT_EQ(best.size(), 2U);
  // With a free network, pure data parallelism (D = 1, W = 4, one micro-batch each) does one F
  // and one B; Chimera's best is W=2 D=2 N=2 (no bubble: D - 2 = 0 idle slots), twice the work.
  EXPECT_EQ(best[0].layout.scheme, "1f1b");
  EXPECT_EQ(best[0].layout.D, 1);
  EXPECT_DOUBLE_EQ(best[0].iteration_ms, 2.0);
  EXPECT_EQ(best[1].layout.D, 2);
  EXPECT_DOUBLE_EQ(best[1].iteration_ms, 4.0);
  EXPECT_DOUBLE_EQ(best[1].bubble_ms, 0.0);
  const std::string why = explain(r);
  EXPECT_NE(why.find("Why 1f1b W=4 D=1 B=1 N=1 wins (2.0 ms"), std::string::npos) << why;
  EXPECT_NE(why.find("2.00x faster than chimera at its best: mostly work (2.0 vs 4.0 ms)"),
            std::string::npos)
      << why;
}

TEST(Planner, MemoryLimitPrunesAndPrefersRecomputation) {
  Predictor roomy = predictor(1, 2);
  PlanRequest request = request_for(4, 16, 4);
  request.schemes = {parse_scheme_choice("gpipe")};
  const PlanResult all = plan(request, roomy);
  // Just enough memory for the leanest layout: everything else is over memory.
  double leanest = all.ranked.front().peak_memory_bytes;
  for (const Prediction& p : all.ranked) leanest = std::min(leanest, p.peak_memory_bytes);
  Predictor tight = predictor(1, 2, leanest);
  const PlanResult r = plan(request, tight);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.over_memory, 0);
  for (const Prediction& p : r.ranked) {
    EXPECT_LE(p.peak_memory_bytes, leanest);
    EXPECT_TRUE(p.layout.recompute);
  }
  Predictor none = predictor(1, 2, leanest / 2);
  EXPECT_TRUE(plan(request, none).ranked.empty());
  EXPECT_EQ(explain(plan(request, none)), "No layout fits in memory.\n");
}

TEST(Planner, SchemeChoices) {
  const SchemeChoice c = parse_scheme_choice("chimera:doubling:4");
  EXPECT_EQ(c.scheme, "chimera");
  EXPECT_EQ(c.variant, "doubling");
  EXPECT_EQ(c.pipes, 4);
  EXPECT_EQ(parse_scheme_choice("interleaved:3").virtual_stages, 3);
  for (const char* bad :
       {"chimaera", "gpipe:x", "interleaved:0", "chimera:direct:two", "chimera:a:2:3", ""}) {
    EXPECT_THROW(parse_scheme_choice(bad), InputError) << bad;
  }
  EXPECT_EQ(default_scheme_choices().size(), 18U);
  EXPECT_EQ(parse_scheme_choice("zb-v").scheme, "zb-v");
  EXPECT_EQ(parse_scheme_choice("dualpipev").scheme, "dualpipev");
  EXPECT_THROW(parse_scheme_choice("zb-v:2"), InputError);
}

// The V's cut the model into 2D stages, so the small model's 8 blocks allow D <= 4; 4 nodes and a
// global batch of 8 in micro-batches of 1 give D = 4 N = 8 and D = 2 N = 4 (N = 2D, as dualpipev
// needs; N a multiple of D, as BitPipe's two V's need), and D = 1, which no V can run.
TEST(Planner, PlansTheVShapes) {
  Predictor predict = predictor(1, 2);
  PlanRequest request = request_for(4, 8, 1);
  const std::vector<std::string> schemes = {"zb-v", "dualpipev", "bitpipe", "bitpipe-zb"};
  request.schemes.clear();
  for (const std::string& s : schemes) request.schemes.push_back(parse_scheme_choice(s));
  const PlanResult r = plan(request, predict);
  std::set<std::string> at_d4;
  for (const Prediction& p : r.ranked) {
    EXPECT_LE(p.layout.D, 4) << p.layout.scheme;
    if (p.layout.scheme == "dualpipev") {
      EXPECT_GE(p.layout.N, 2 * p.layout.D);
    }
    if (p.layout.scheme.starts_with("bitpipe")) {
      EXPECT_EQ(p.layout.N % p.layout.D, 0);
    }
    if (p.layout.D == 4) at_d4.insert(p.layout.scheme);
  }
  EXPECT_EQ(at_d4, std::set<std::string>(schemes.begin(), schemes.end()));
  EXPECT_GT(r.invalid, 0);  // D = 1
}

// Memory as the binding constraint: with no recomputation and a device just big enough for
// V-Min's leanest layout, no 1F1B-class schedule (1f1b, zb-h1, zb-v: D micro-batches' activations
// on the first worker) fits, and the planner picks a V with less activation memory.
TEST(Planner, PicksVMinOrVHalfWhereOneFOneBDoesNotFit) {
  PlanRequest request = request_for(4, 16, 1);
  request.consider_recompute = false;
  request.schemes = {parse_scheme_choice("1f1b"), parse_scheme_choice("zb-h1"),
                     parse_scheme_choice("zb-v"), parse_scheme_choice("v-half"),
                     parse_scheme_choice("v-min")};
  Predictor roomy = predictor(1, 2);
  const PlanResult all = plan(request, roomy);
  double v_min_leanest = 1e300;
  double one_f_one_b_leanest = 1e300;
  for (const Prediction& p : all.ranked) {
    if (p.layout.scheme == "v-half") continue;
    double& leanest = p.layout.scheme == "v-min" ? v_min_leanest : one_f_one_b_leanest;
    leanest = std::min(leanest, p.peak_memory_bytes);
  }
  ASSERT_LT(v_min_leanest, one_f_one_b_leanest);

  Predictor tight = predictor(1, 2, v_min_leanest);
  const PlanResult r = plan(request, tight);
  ASSERT_FALSE(r.ranked.empty());
  for (const Prediction& p : r.ranked) {
    EXPECT_TRUE(p.layout.scheme == "v-min" || p.layout.scheme == "v-half") << p.layout.scheme;
  }
  EXPECT_EQ(r.ranked.front().layout.scheme, "v-min");
  EXPECT_EQ(r.ranked.front().layout.D, 4);
}

TEST(Planner, ImpossibleRequestsAreInputErrors) {
  Predictor predict = predictor(1, 1);  // 8 blocks: D <= 8
  PlanRequest request;
  request.global_batch = 3;
  request.nodes = 4;  // W = 1, D = 4 divides G = 3
  EXPECT_NO_THROW(plan(request, predict));
  request.nodes = 7;  // W = 1, D = 7
  EXPECT_NO_THROW(plan(request, predict));
  request.nodes = 64;  // every split has W >= 8, which does not divide G = 3
  EXPECT_THROW(plan(request, predict), InputError);
  request.nodes = 0;
  EXPECT_THROW(plan(request, predict), InputError);
}

}  // namespace
}  // namespace chimera::plan
