// Schedule search: never worse than the best built-in, verified, within the cap, deterministic,
// and its lower bound is sound (never above a makespan) and tight where it can be.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "chimera/core/error.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/search.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

SearchOptions options(int D, int N, const std::string& cost, double cap = 0, double seconds = 0.3) {
  SearchOptions o;
  o.workers = D;
  o.micro_batches = N;
  o.costs = Costs::parse(cost);
  o.max_in_flight = cap;
  o.seconds = seconds;
  o.seed = 7;
  return o;
}

double peak(const SimResult& r) {
  return *std::max_element(r.peak_activations.begin(), r.peak_activations.end());
}

// The best built-in within the cap, computed here independently of the search.
double best_builtin(int D, int N, const Costs& costs, double cap) {
  double best = 1e300;
  for (const Candidate& c : builtin_candidates(D, N)) {
    const SimResult r = simulate(c.schedule, costs);
    if (peak(r) <= cap + 1e-9) best = std::min(best, r.makespan);
  }
  return best;
}

TEST(SearchCandidates, TriesEverySchemeAndVariant) {
  std::vector<std::string> labels;
  for (const Candidate& c : builtin_candidates(8, 16)) labels.push_back(c.label);
  for (const char* want :
       {"gpipe", "1f1b", "gems", "interleaved v=2", "zb-h1", "chimera direct", "chimera doubling",
        "chimera halving", "chimera direct, 4 pipes", "chimera halving, 8 pipes"}) {
    EXPECT_NE(std::find(labels.begin(), labels.end(), want), labels.end()) << want;
  }
  // D = 3: no chimera (odd D), interleaved needs N % D = 0.
  for (const Candidate& c : builtin_candidates(3, 4)) {
    EXPECT_FALSE(c.label.starts_with("chimera")) << c.label;
    EXPECT_NE(c.label, "interleaved v=2");
  }
}

TEST(Search, NeverWorseThanTheBestBuiltinAndWithinTheCap) {
  for (const auto& [D, N, cost, cap] :
       std::vector<std::tuple<int, int, std::string, double>>{{4, 8, "1:2:1", 0},
                                                              {4, 4, "1:1", 0},
                                                              {3, 5, "1:2", 0},
                                                              {4, 8, "1:2", 12},
                                                              {2, 3, "2:3:1", 4}}) {
    const SearchResult r = search_schedule(options(D, N, cost, cap, 0.15));
    // The cap counts chunk-activations, the simulator's peaks stage-units of two chunks.
    const double limit = cap > 0 ? from_chunks(cap) : D;
    const VerifyResult v = check(r.schedule);
    EXPECT_TRUE(v.ok) << v.problem;
    const SimResult sim = simulate(r.schedule, Costs::parse(cost));
    EXPECT_DOUBLE_EQ(sim.makespan, r.makespan);
    EXPECT_LE(peak(sim), limit + 1e-9) << D << " " << N;
    EXPECT_LE(r.makespan, best_builtin(D, N, Costs::parse(cost), limit) + 1e-9) << D << " " << N;
    EXPECT_LE(r.lower_bound, r.makespan + 1e-9);
    EXPECT_EQ(r.schedule.scheme, "search");
    EXPECT_EQ(r.schedule.workers, D);
  }
}

TEST(Search, ImprovesOnTheBestBuiltinForD6N9Cost121) {
  // N not a multiple of D: no Chimera direct. The best built-in within D = 6 activations is zb-v
  // at 30.5 (F = I = W = 1); list scheduling the split ops on its V placement reaches the
  // bound, 29.5.
  const SearchResult r = search_schedule(options(6, 9, "1:2:1", 0, 0.3));
  EXPECT_EQ(r.best_builtin, "zb-v");
  EXPECT_DOUBLE_EQ(r.builtin_makespan, 30.5);
  EXPECT_LT(r.makespan, 30.5);
  EXPECT_GE(r.makespan, r.lower_bound - 1e-9);
}

TEST(Search, KeepsABuiltinThatMeetsTheBound) {
  // D = 4, N = 8, 1:2:1, cap D: Chimera with 4 pipes idles nowhere (makespan = N (F + B) = 24 =
  // the work bound); the search cannot beat it and returns it.
  const SearchResult r = search_schedule(options(4, 8, "1:2:1", 0, 0.1));
  EXPECT_EQ(r.best_builtin, "chimera direct, 4 pipes");
  EXPECT_DOUBLE_EQ(r.makespan, 24);
  EXPECT_DOUBLE_EQ(r.lower_bound, 24);
  EXPECT_DOUBLE_EQ(r.gap, 0);
  EXPECT_EQ(r.schedule.variant, "chimera direct, 4 pipes");
}

TEST(Search, IsDeterministicForASeed) {
  const SearchOptions o = options(4, 8, "1:2:1", 0, 0.1);
  const SearchResult a = search_schedule(o);
  const SearchResult b = search_schedule(o);
  ASSERT_FALSE(a.stopped_by_clock);
  EXPECT_EQ(a.schedule.ops, b.schedule.ops);
  EXPECT_EQ(a.evaluations, b.evaluations);
}

TEST(Search, RoundTripsThroughJsonAndRunsAsAFileScheme) {
  const SearchResult r = search_schedule(options(6, 9, "1:2:1", 0, 0.3));
  // The wall-clock guard (2x the budget) can end the search before its first improvement on a
  // loaded machine under the sanitizers: then there is nothing searched to round-trip.
  if (r.stopped_by_clock && r.schedule.variant.find("local search") == std::string::npos)
    GTEST_SKIP() << "the search was stopped by the clock before it improved on "
                 << r.schedule.variant;
  ASSERT_NE(r.schedule.variant.find("local search"), std::string::npos) << r.schedule.variant;
  const std::string text = schedule_to_json(r.schedule);
  const Schedule back = schedule_from_json(text);
  EXPECT_EQ(back.ops, r.schedule.ops);
  EXPECT_EQ(back.scheme, "search");
  EXPECT_EQ(back.variant, r.schedule.variant);
  const VerifyResult v = check(back);
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_DOUBLE_EQ(simulate(back, Costs::parse("1:2:1")).makespan, r.makespan);
  // What `chimera train --set parallel.scheme=file:PATH` calls.
  const std::string path = ::testing::TempDir() + "searched_d6_n9.json";
  std::ofstream(path) << text;
  const Schedule loaded = make_schedule(testing::request("file:" + path, 6, 9));
  EXPECT_EQ(loaded.ops, r.schedule.ops);
}

TEST(Search, SummaryNamesMakespanBoundGapAndStart) {
  const SearchResult r = search_schedule(options(4, 8, "1:2:1", 0, 0.1));
  const std::string text = search_summary(r);
  for (const char* want : {"makespan", "bubble ratio", "lower bound", "gap", "started from",
                           "chimera direct, 4 pipes (24)"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

// The cap in chunk-activations as V-Min counts them: 4 at D = 4 is V-Min's peak, half of what
// 1F1B, zb-h1 and zb-v hold (2D = 8). Of the others only GEMS (one pair at a time, slower) fits.
TEST(Search, ACapOfVMinsPeakStartsFromVMin) {
  const SearchResult r = search_schedule(options(4, 8, "1:2:1", 4, 0.1));
  EXPECT_EQ(r.best_builtin, "v-min");
  EXPECT_LE(r.peak_activations, from_chunks(4) + 1e-9);
  EXPECT_EQ(r.builtins_within_cap, 2);
}

TEST(Search, RefusesACapNoBuiltinMeets) {
  EXPECT_THROW(search_schedule(options(4, 8, "1:2", 0.5)), InputError);
}

TEST(SearchBound, NeverAboveAnyBuiltinMakespan) {
  for (int D : {1, 2, 3, 4, 6, 8}) {
    for (int N : {1, 2, 3, 4, 8, 16}) {
      for (const char* cost : {"1:1", "1:2", "1:2:1", "2:3:1", "1:3:2.5"}) {
        const Costs costs = Costs::parse(cost);
        for (const Candidate& c : builtin_candidates(D, N)) {
          const double makespan = simulate(c.schedule, costs).makespan;
          EXPECT_LE(structure_lower_bound(c.schedule, costs), makespan + 1e-9)
              << c.label << " D=" << D << " N=" << N << " cost " << cost;
        }
      }
    }
  }
}

TEST(SearchBound, TightForOneWorkerAndForZbH1) {
  // D = 1: one worker runs N (F + B) back to back.
  const Costs costs = Costs::parse("1:2");
  EXPECT_DOUBLE_EQ(structure_lower_bound(make_schedule(testing::request("gpipe", 1, 5)), costs),
                   15);
  EXPECT_DOUBLE_EQ(simulate(make_schedule(testing::request("gpipe", 1, 5)), costs).makespan, 15);
  // Single pipe, F = I = W: zb-h1's 3N + D - 1 is the fill bound of the last worker.
  EXPECT_DOUBLE_EQ(
      structure_lower_bound(make_schedule(testing::request("zb-h1", 4, 8)), Costs::parse("1:2:1")),
      27);
  // The critical path: one micro-batch F through 4 stages, I back, then W: 4 + 3 + 2.
  EXPECT_DOUBLE_EQ(
      structure_lower_bound(make_schedule(testing::request("zb-h1", 4, 1)), Costs::parse("1:2:1")),
      9);
  EXPECT_DOUBLE_EQ(
      simulate(make_schedule(testing::request("zb-h1", 4, 1)), Costs::parse("1:2:1")).makespan, 9);
}

TEST(SearchBound, SearchedMakespanNeverBelowIt) {
  for (int D : {2, 4, 6}) {
    const SearchResult r = search_schedule(options(D, 2 * D, "1:2:1", 0, 0.1));
    EXPECT_LE(r.lower_bound, r.makespan + 1e-9) << D;
    EXPECT_LE(structure_lower_bound(r.schedule, Costs::parse("1:2:1")), r.makespan + 1e-9) << D;
  }
}

}  // namespace
}  // namespace chimera::schedule
