// PyTorch's compute-only schedule CSV: export, import, and the round trip of every scheme whose
// stages each sit on one worker.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/schedule_file.hpp"
#include "chimera/schedule/torch_csv.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

std::string input_error(const auto& run) {
  try {
    run();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return {};
}

TEST(TorchCsv, WritesOneRowPerRankAsPyTorchDoes) {
  EXPECT_EQ(schedule_to_torch_csv(make_schedule(request("1f1b", 2, 3))),
            "0F0,0F1,0B0,0F2,0B1,0B2\r\n1F0,1B0,1F1,1B1,1F2,1B2\r\n");
  const std::string zb = schedule_to_torch_csv(make_schedule(request("zb-h1", 2, 2)));
  EXPECT_EQ(zb, "0F0,0F1,0I0,0W0,0I1,0W1\r\n1F0,1I0,1F1,1I1,1W0,1W1\r\n");
  EXPECT_EQ(zb.find('B'), std::string::npos) << zb;
}

TEST(TorchCsv, DoubledForwardBecomesTwoActions) {
  Schedule s;
  s.scheme = "hand";
  s.workers = 1;
  s.stages = 1;
  s.schedule_micro_batches = 2;
  s.placement = {{0}};
  s.pipe_of = {0, 0};
  s.ops = {{{OpKind::F, 0, 0, {0, 1}}, {OpKind::B, 0, 0, {1}}, {OpKind::B, 0, 0, {0}}}};
  ASSERT_TRUE(check(s).ok) << check(s).problem;
  EXPECT_EQ(schedule_to_torch_csv(s), "0F0,0F1,0B1,0B0\r\n");
}

TEST(TorchCsv, RoundTripsEverySinglePlacementScheme) {
  const std::vector<ScheduleRequest> requests = {
      request("gpipe", 1, 3),
      request("gpipe", 4, 8),
      request("1f1b", 1, 2),
      request("1f1b", 4, 8),
      request("1f1b", 8, 3),
      request("interleaved", 4, 8),
      request("interleaved", 2, 4, "", 0, 3),
      request("zb-h1", 4, 8),
      request("zb-h1", 3, 2),
      request("zb-v", 4, 8),  // V placement: a rank holds stages w and 2D-1-w
      request("zb-v", 3, 1),
      request("dualpipev", 4, 8),
      request("v-half", 4, 8),
      request("v-min", 3, 5),
  };
  for (const ScheduleRequest& r : requests) {
    const Schedule s = make_schedule(r);
    const Schedule back = schedule_from_torch_csv(schedule_to_torch_csv(s));
    SCOPED_TRACE(r.scheme + " D=" + std::to_string(r.stages) +
                 " N=" + std::to_string(r.micro_batches));
    EXPECT_TRUE(check(back).ok) << check(back).problem;
    EXPECT_EQ(back.scheme, "torch-csv");
    EXPECT_EQ(back.variant, "");
    EXPECT_EQ(back.workers, s.workers);
    EXPECT_EQ(back.stages, s.stages);
    EXPECT_EQ(back.schedule_micro_batches, s.schedule_micro_batches);
    EXPECT_EQ(back.placement, s.placement);
    EXPECT_EQ(back.pipe_of, s.pipe_of);
    EXPECT_EQ(back.ops, s.ops);
    EXPECT_FALSE(back.forward_only);
  }
  const Schedule eval = forward_only(make_schedule(request("1f1b", 3, 4)));
  const Schedule back = schedule_from_torch_csv(schedule_to_torch_csv(eval));
  EXPECT_TRUE(back.forward_only);
  EXPECT_EQ(back.ops, eval.ops);
}

TEST(TorchCsv, RefusesReplicatedStages) {
  for (const ScheduleRequest& r :
       {request("chimera", 4, 4), request("gems", 4, 4), request("gems", 3, 4),
        request("chimera", 4, 8, "halving"), request("chimera-zb", 4, 8), request("bitpipe", 4, 8),
        request("bitpipe-zb", 4, 8)}) {
    const std::string what = input_error([&] { (void)schedule_to_torch_csv(make_schedule(r)); });
    EXPECT_NE(what.find("cannot write the " + r.scheme + " schedule as a torch CSV: stage"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("on one rank"), std::string::npos) << what;
  }
}

TEST(TorchCsv, ReadsBubblesCrlfOverlapAndVShapes) {
  // A V-shape (rank 0 holds stages 0 and 3, rank 1 stages 1 and 2), PyTorch's idle cells, an
  // overlapped F/B cell and CRLF rows.
  const std::string text =
      "0F0,0F1,,3F0,3B0,(3F1;3B1)OVERLAP_F_B,0B0,0B1\r\n"
      ",1F0,1F1,2F0,2B0,2F1,2B1,1B0,1B1\r\n";
  const Schedule s = schedule_from_torch_csv(text);
  EXPECT_TRUE(check(s).ok) << check(s).problem;
  EXPECT_EQ(s.workers, 2);
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.schedule_micro_batches, 2);
  EXPECT_EQ(s.placement, (std::vector<std::vector<int>>{{0, 1, 1, 0}}));
  EXPECT_EQ(s.pipe_of, (std::vector<int>{0, 0}));
  ASSERT_EQ(s.ops[0].size(), 8U);
  EXPECT_EQ(s.ops[0][4], (Op{OpKind::F, 0, 3, {1}}));
  EXPECT_EQ(s.ops[0][5], (Op{OpKind::B, 0, 3, {1}}));
}

// PyTorch's _load_csv reads an empty line as a rank with no actions (csv.reader yields [] for
// it), so a file with a trailing empty line is one rank more there: the same here.
TEST(TorchCsv, AnEmptyLineIsARankWithNoActionsAsInPyTorch) {
  const Schedule s = schedule_from_torch_csv("0F0,0B0\r\n1F0,1B0\r\n\r\n");
  EXPECT_EQ(s.workers, 3);
  EXPECT_EQ(s.stages, 2);
  ASSERT_EQ(s.ops.size(), 3U);
  EXPECT_TRUE(s.ops[2].empty());
  EXPECT_EQ(schedule_from_torch_csv("0F0,0B0\n1F0,1B0\n").workers, 2)
      << "the newline that ends the last row is no empty line";
  EXPECT_EQ(schedule_from_torch_csv("0F0,0B0\n\n1F0,1B0").ops[1].size(), 0U);
}

TEST(TorchCsv, NamesTheProblemInMalformedFiles) {
  const auto problem = [](const std::string& text) {
    return input_error([&] { (void)schedule_from_torch_csv(text); });
  };
  EXPECT_NE(problem("0F0,0X1\n").find("row 0 cell 1: '0X1' has an unknown computation type"),
            std::string::npos);
  EXPECT_NE(problem("0F0\n0SEND_F0\n").find("row 1 cell 0: '0SEND_F0' is a communication"),
            std::string::npos);
  EXPECT_NE(problem("F0\n").find("'F0' is not an action"), std::string::npos);
  EXPECT_NE(problem("0F\n").find("'0F' is not an action"), std::string::npos);
  EXPECT_NE(problem("0F1x\n").find("'0F1x' is not an action"), std::string::npos);
  EXPECT_NE(problem("0F0,99999999999F0\n").find("stage index is too large"), std::string::npos);
  EXPECT_NE(problem("0F0,1F0\n1F0\n").find("row 1 cell 0: stage 1 is on rank 0 and rank 1"),
            std::string::npos);
  EXPECT_NE(problem("0F0,0B0\n2F0,2B0\n").find("stage 1 is on no rank"), std::string::npos);
  EXPECT_NE(problem("").find("no rows"), std::string::npos);
  EXPECT_NE(problem("\r\n\n").find("no row has an action"), std::string::npos)
      << "two empty lines: two ranks with no actions, as PyTorch reads them";
  EXPECT_NE(problem(",,\n").find("no row has an action"), std::string::npos);
}

TEST(TorchCsv, TheVerifierJudgesWhatWasRead) {
  // Incomplete: micro-batch 1 never runs backward at stage 1.
  VerifyResult r = check(schedule_from_torch_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1\n"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.problem.find("missing op: micro-batch 1 has no B at stage 1"), std::string::npos)
      << r.problem;
  // Deadlock: each rank waits first for what the other produces later.
  r = check(schedule_from_torch_csv("0B0,0F0\n1F0,1B0\n"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.problem.find("deadlock"), std::string::npos) << r.problem;
}

TEST(TorchCsv, ScheduleFileVerifiesAndNamesTheFile) {
  const std::string path = ::testing::TempDir() + "torch_csv_deadlock.csv";
  { std::ofstream(path) << "0B0,0F0\n1F0,1B0\n"; }
  const std::string what = input_error([&] { (void)read_schedule_file(path); });
  EXPECT_NE(what.find("schedule file '" + path + "' (D=2, N=1): deadlock"), std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  { std::ofstream(path) << schedule_to_torch_csv(make_schedule(request("zb-h1", 3, 4))); }
  const Schedule s = read_schedule_file(path);
  EXPECT_EQ(s.ops, make_schedule(request("zb-h1", 3, 4)).ops);
  std::remove(path.c_str());
  EXPECT_NE(input_error([&] { (void)read_schedule_file(path); }).find("cannot be read"),
            std::string::npos);
}

}  // namespace
}  // namespace chimera::schedule
