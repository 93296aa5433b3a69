// Invalid requests are input errors (exit status 2) with one line naming the rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

void expect_refused(const ScheduleRequest& r, const std::string& fragment) {
  try {
    make_schedule(r);
    ADD_FAILURE() << r.scheme << " D=" << r.stages << " N=" << r.micro_batches << " accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    EXPECT_EQ(exit_status(e), 2);
  }
}

TEST(Requests, ChimeraNeedsEvenStagesAndMicroBatches) {
  expect_refused(request("chimera", 5, 10), "chimera needs an even D (got D=5)");
  expect_refused(request("chimera", 4, 7), "chimera needs an even N (got N=7)");
}

TEST(Requests, DirectNeedsMultipleOfStages) {
  expect_refused(request("chimera", 4, 6, "direct"),
                 "chimera direct needs N to be a multiple of D (got N=6, D=4)");
}

TEST(Requests, PipesMustBeTwiceADivisorOfHalfTheStages) {
  expect_refused(request("chimera", 8, 8, "direct", 6),
                 "pipes = 2f = 6 needs f = 3 to divide D/2 = 4");
  expect_refused(request("chimera", 8, 8, "direct", 3), "pipes = 2f, an even number >= 2");
  expect_refused(request("chimera", 4, 8, "direct", 8), "f = 4 to divide D/2 = 2");
}

TEST(Requests, AtLeastTwoStagesExceptForTheFlushSchemes) {
  for (const std::string& scheme : scheme_names()) {
    if (scheme == "gpipe" || scheme == "1f1b") {
      // D = 1: the whole model in one process, gradient accumulation over the micro-batches.
      const Schedule s = make_schedule(request(scheme, 1, 4));
      EXPECT_EQ(s.workers, 1);
      EXPECT_EQ(s.ops[0].size(), 8U);
      continue;
    }
    expect_refused(request(scheme, 1, 4), "needs D >= 2 stages (got D=1)");
  }
  expect_refused(request("1f1b", 0, 4), "needs D >= 1 stages (got D=0)");
  expect_refused(request("1f1b", 4, 0), "needs N >= 1 micro-batches (got N=0)");
}

TEST(Requests, UnknownSchemeSuggestsTheClosest) {
  expect_refused(request("chimaera", 4, 4), "unknown scheme 'chimaera'");
  expect_refused(request("chimaera", 4, 4), "did you mean 'chimera'?");
  expect_refused(request("pipedream", 4, 4), "use one of gpipe, 1f1b, gems");
}

TEST(Requests, VariantRules) {
  expect_refused(request("chimera", 4, 8, "tripling"),
                 "parallel.variant (--variant) = tripling: use direct, doubling or halving");
  expect_refused(request("chimera", 6, 6, "doubling"),
                 "even number of micro-batches per pipe (got N/pipes = 3)");
  expect_refused(request("chimera", 4, 6, "halving", 4), "multiple of 4 (got N=6)");
}

TEST(Requests, OptionsOfOtherSchemesAreRefused) {
  expect_refused(
      request("1f1b", 4, 4, "doubling"),
      "parallel.variant (--variant) = doubling applies to chimera only (scheme is 1f1b)");
  expect_refused(request("gpipe", 4, 4, "", 2),
                 "parallel.pipes (--pipes) = 2 applies to chimera only");
  expect_refused(request("chimera", 4, 4, "", 0, 2),
                 "parallel.virtual (--virtual) = 2 applies to interleaved only");
  expect_refused(request("interleaved", 4, 4, "", 0, 1), "v >= 2 virtual stages");
  expect_refused(request("interleaved", 4, 6, "", 0, 2), "N to be a multiple of D");
  expect_refused(request("gems", 4, 5), "gems needs an even N");
  // The config defaults of other schemes' keys are fine.
  EXPECT_NO_THROW(make_schedule(request("1f1b", 4, 4, "direct", 0, 1)));
  EXPECT_NO_THROW(make_schedule(request("gems", 4, 4, "", 2)));
}

// Every row of the table against every scheme it does not apply to: refused, naming the key and
// the schemes it applies to; a value every scheme accepts (the config's defaults) is not a setting.
TEST(Requests, EverySettingIsRefusedWhereItDoesNotApply) {
  int refused = 0;
  for (const SchemeSetting& row : scheme_settings()) {
    for (const std::string& scheme : scheme_names()) {
      if (std::find(row.schemes.begin(), row.schemes.end(), scheme) != row.schemes.end()) continue;
      ScheduleRequest r = request(scheme, 4, 8);
      if (row.key == "variant") r.variant = "halving";
      if (row.key == "pipes") r.pipes = 4;
      if (row.key == "virtual") r.virtual_stages = 3;
      if (row.key == "max_in_flight") r.max_in_flight = 8;
      expect_refused(r, fmt::format("parallel.{} (", row.key));
      expect_refused(r,
                     fmt::format("applies to {} only (scheme is {})", row.schemes.front(), scheme));
      ++refused;
    }
  }
  EXPECT_EQ(refused, 4 * static_cast<int>(scheme_names().size()) - 4);
}

TEST(Requests, TooLargeIsRefusedNotAttempted) {
  expect_refused(request("1f1b", 4096, 1 << 20), "more than the");
  expect_refused(request("1f1b", 100000, 4), "D <= 4096");
}

}  // namespace
}  // namespace chimera::schedule
