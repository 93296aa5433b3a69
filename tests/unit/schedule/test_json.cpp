// The schedule JSON of DESIGN §3: exact keys, round trips, clear errors on bad input.
#include <gtest/gtest.h>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

TEST(Json, MatchesTheDesignExample) {
  const std::string text = schedule_to_json(make_schedule(request("chimera", 4, 8)));
  EXPECT_EQ(
      text.rfind("{\"scheme\": \"chimera\", \"variant\": \"direct\", \"stages\": 4, "
                 "\"micro_batches\": 8, \"pipes\": 2,\n \"placement\": [[0,1,2,3],[3,2,1,0]], "
                 "\"pipe_of\": [0,0,0,0,1,1,1,1],\n \"workers\": [\n  [{\"op\": \"F\", "
                 "\"pipe\": 0, \"stage\": 0, \"mbs\": [0]}, ",
                 0),
      0U)
      << text;
}

TEST(Json, RoundTripsEveryScheme) {
  const std::vector<ScheduleRequest> requests = {request("gpipe", 4, 4),
                                                 request("1f1b", 4, 8),
                                                 request("gems", 3, 4),
                                                 request("interleaved", 4, 8, "", 0, 3),
                                                 request("zb-h1", 4, 8),
                                                 request("chimera", 8, 16, "direct", 4),
                                                 request("chimera", 4, 8, "doubling"),
                                                 request("chimera", 4, 8, "halving")};
  for (const ScheduleRequest& r : requests) {
    const Schedule s = make_schedule(r);
    const Schedule back = schedule_from_json(schedule_to_json(s));
    EXPECT_EQ(back.scheme, s.scheme);
    EXPECT_EQ(back.variant, s.variant);
    EXPECT_EQ(back.workers, s.workers);
    EXPECT_EQ(back.stages, s.stages);
    EXPECT_EQ(back.micro_batches, s.micro_batches);
    EXPECT_EQ(back.mb_split, s.mb_split) << r.scheme << " " << r.variant;
    EXPECT_EQ(back.placement, s.placement);
    EXPECT_EQ(back.pipe_of, s.pipe_of);
    EXPECT_EQ(back.ops, s.ops);
    EXPECT_TRUE(check(back).ok);
  }
}

TEST(Json, HalvingCarriesItsSplit) {
  const std::string text = schedule_to_json(make_schedule(request("chimera", 4, 4, "halving")));
  EXPECT_NE(text.find("\"micro_batches\": 8, \"mb_split\": 2, "), std::string::npos) << text;
  EXPECT_EQ(schedule_to_json(make_schedule(request("1f1b", 2, 2))).find("mb_split"),
            std::string::npos);
}

void expect_bad(const std::string& text, const std::string& fragment) {
  try {
    schedule_from_json(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Json, BadInputNamesWhatIsWrong) {
  const std::string good = schedule_to_json(make_schedule(request("1f1b", 2, 1)));
  expect_bad("{not json", "schedule JSON: ");
  expect_bad("[1, 2]", "the top level must be an object");
  std::string missing = good;
  missing.replace(missing.find("\"pipe_of\""), 9, "\"pipe_off\"");
  expect_bad(missing, "has no key \"pipe_of\"");
  std::string wrong_kind = good;
  wrong_kind.replace(wrong_kind.find("\"op\": \"F\""), 9, "\"op\": \"X\"");
  expect_bad(wrong_kind, "workers[0][0].op = \"X\": use F, B, I or W");
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("\"stages\": 2"), 11, "\"stages\": \"2\"");
  expect_bad(wrong_type, "stages must be an integer");
  std::string wrong_pipes = good;
  wrong_pipes.replace(wrong_pipes.find("\"pipes\": 1"), 10, "\"pipes\": 2");
  expect_bad(wrong_pipes, "\"pipes\" = 2 but placement lists 1 pipes");
}

}  // namespace
}  // namespace chimera::schedule
