// The schedule JSON of DESIGN §3: exact keys, round trips, clear errors on bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

TEST(Json, MatchesTheDesignExample) {
  const std::string text = schedule_to_json(make_schedule(request("chimera", 4, 8)));
  EXPECT_EQ(text.rfind("{\"scheme\":\"chimera\",\"variant\":\"direct\",\"stages\":4,"
                       "\"micro_batches\":8,\"pipes\":2,\n \"placement\":[[0,1,2,3],[3,2,1,0]],"
                       "\"pipe_of\":[0,0,0,0,1,1,1,1],\n \"workers\":[\n  [{\"op\":\"F\","
                       "\"pipe\":0,\"stage\":0,\"mbs\":[0]},",
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
    EXPECT_EQ(back.schedule_micro_batches, s.schedule_micro_batches);
    EXPECT_EQ(back.mb_split, s.mb_split) << r.scheme << " " << r.variant;
    EXPECT_EQ(back.placement, s.placement);
    EXPECT_EQ(back.pipe_of, s.pipe_of);
    EXPECT_EQ(back.ops, s.ops);
    EXPECT_TRUE(check(back).ok);
  }
}

TEST(Json, HalvingCarriesItsSplit) {
  const std::string text = schedule_to_json(make_schedule(request("chimera", 4, 4, "halving")));
  EXPECT_NE(text.find("\"micro_batches\":8,\"mb_split\":2,"), std::string::npos) << text;
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

// `text` with the first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(Json, BadInputNamesWhatIsWrong) {
  const std::string good = schedule_to_json(make_schedule(request("1f1b", 2, 1)));
  expect_bad("{not json", "schedule JSON: ");
  expect_bad("[1, 2]", "the top level must be an object");
  expect_bad(replaced(good, "\"pipe_of\"", "\"pipe_off\""), "has no key \"pipe_of\"");
  expect_bad(replaced(good, "\"op\":\"F\"", "\"op\":\"X\""),
             "workers[0][0].op = \"X\": use F, B, I or W");
  expect_bad(replaced(good, "\"stages\":2", "\"stages\":\"2\""), "stages must be an integer");
  expect_bad(replaced(good, "\"pipes\":1", "\"pipes\":2"),
             "\"pipes\" = 2 but placement lists 1 pipes");
  expect_bad(replaced(good, "\"pipes\":1", "\"forward_only\":1,\"pipes\":1"),
             "\"forward_only\" must be true or false");
}

// The lowered program is in the JSON, checked, and ignored by the parser.
TEST(Json, CarriesTheLoweredProgram) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const Program program = lower(s);
  const std::string text = schedule_to_json(s, &program);
  const auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["program"].size(), 4U);
  EXPECT_EQ(j["sums_in_one_order"], true);
  std::size_t sends = 0, waits = 0, tied = 0;
  for (const auto& worker : j["program"]) {
    EXPECT_EQ(worker.back()["instr"], "wait-sums");
    for (const auto& in : worker) {
      sends += in["instr"] == "send" ? 1 : 0;
      waits += in["instr"] == "wait" ? 1 : 0;
      tied += in["instr"] == "tied-grad-ready" ? 1 : 0;
    }
  }
  // Chimera D=4, N=4: 4 micro-batches x 3 stage boundaries x (activation + gradient).
  EXPECT_EQ(sends, 24U);
  EXPECT_EQ(waits, sends);
  EXPECT_EQ(tied, 2U);  // workers 0 and 3 hold both ends of one pipe each
  EXPECT_EQ(schedule_from_json(text).ops, s.ops);
}

TEST(Json, WritesWaitGatherWithItsStage) {
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  const Program program = lower(s, {.shard_optimizer = true});
  const auto j = nlohmann::json::parse(schedule_to_json(s, &program));
  for (int w = 0; w < 2; ++w) {
    std::vector<int> gathered;
    for (const auto& in : j["program"][w]) {
      if (in["instr"] == "wait-gather") gathered.push_back(in["stage"]);
    }
    EXPECT_EQ(gathered, std::vector<int>{w});  // 1F1B: worker w holds stage w
  }
}

TEST(Json, ForwardOnlyRoundTrips) {
  const Schedule s = forward_only(make_schedule(request("chimera", 4, 4)));
  const Schedule back = schedule_from_json(schedule_to_json(s));
  EXPECT_TRUE(back.forward_only);
  EXPECT_EQ(back.ops, s.ops);
  EXPECT_TRUE(check(back).ok) << check(back).problem;
}

}  // namespace
}  // namespace chimera::schedule
