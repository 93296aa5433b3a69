// The verifier rejects hand-broken schedules and names the first problem.
#include <gtest/gtest.h>

#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

Schedule chimera_4x4() {
  return make_schedule(request("chimera", 4, 4));
}

void expect_problem(const Schedule& s, const std::string& fragment) {
  const VerifyResult r = check(s);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.problem.find(fragment), std::string::npos) << r.problem;
  EXPECT_EQ(r.problem.find('\n'), std::string::npos) << "one line: " << r.problem;
  try {
    verify(s);
    ADD_FAILURE() << "verify() accepted a broken schedule";
  } catch (const InputError&) {
    ADD_FAILURE() << "a broken schedule is an internal error, not bad input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Verify, AcceptsGeneratedSchedules) {
  EXPECT_TRUE(check(chimera_4x4()).ok);
  EXPECT_NO_THROW(verify(chimera_4x4()));
}

TEST(Verify, RejectsMissingOp) {
  Schedule s = chimera_4x4();
  auto& ops = s.ops[2];
  ops.erase(std::find(ops.begin(), ops.end(), Op{OpKind::B, 0, 2, {0}}));
  expect_problem(s, "missing op: micro-batch 0 has no B at stage 2");
}

TEST(Verify, RejectsMissingWeightGradient) {
  Schedule s = make_schedule(request("zb-h1", 4, 4));
  auto& ops = s.ops[1];
  ops.erase(
      std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::W; }));
  expect_problem(s, "has no W at stage 1");
}

TEST(Verify, RejectsDuplicateOp) {
  Schedule s = chimera_4x4();
  s.ops[0].push_back(s.ops[0].front());
  expect_problem(s, "duplicate: micro-batch 0 already runs F at stage 0");
}

TEST(Verify, RejectsWrongWorker) {
  Schedule s = chimera_4x4();
  // Move F0d1 from worker 1 to worker 2.
  ASSERT_EQ(s.ops[1].front(), (Op{OpKind::F, 0, 1, {0}}));
  s.ops[1].erase(s.ops[1].begin());
  s.ops[2].emplace(s.ops[2].begin(), Op{OpKind::F, 0, 1, {0}});
  expect_problem(s, "wrong worker: placement puts pipe 0 stage 1 on worker 1");
}

TEST(Verify, RejectsMicroBatchOnTheWrongPipe) {
  Schedule s = chimera_4x4();
  s.pipe_of[0] = 1;
  expect_problem(s, "micro-batch 0 belongs to pipe 1");
}

TEST(Verify, RejectsCyclicWait) {
  Schedule s = chimera_4x4();
  // Worker 0 runs B0d0 before F0d0: it waits for a gradient that needs its own forward.
  auto& ops = s.ops[0];
  const auto forward = std::find(ops.begin(), ops.end(), Op{OpKind::F, 0, 0, {0}});
  const auto backward = std::find(ops.begin(), ops.end(), Op{OpKind::B, 0, 0, {0}});
  ASSERT_NE(forward, ops.end());
  ASSERT_NE(backward, ops.end());
  std::iter_swap(forward, backward);
  expect_problem(s, "deadlock: cyclic wait: ");
}

TEST(Verify, RejectsCrossWorkerCycle) {
  // Stage 0 runs B0 before F1; stage 1 runs F1 before F0. Stage 0's F1 waits for its B0, which
  // waits for stage 1's B0, which waits (after F0) for stage 1's F1, which waits for stage 0's F1.
  Schedule s = make_schedule(request("1f1b", 2, 2));
  s.ops[0] = {{OpKind::F, 0, 0, {0}},
              {OpKind::B, 0, 0, {0}},
              {OpKind::F, 0, 0, {1}},
              {OpKind::B, 0, 0, {1}}};
  s.ops[1] = {{OpKind::F, 0, 1, {1}},
              {OpKind::F, 0, 1, {0}},
              {OpKind::B, 0, 1, {0}},
              {OpKind::B, 0, 1, {1}}};
  const VerifyResult r = check(s);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.problem.rfind("deadlock: cyclic wait: ", 0), 0U) << r.problem;
  EXPECT_NE(r.problem.find("worker 0 op 1 (B0d0) waits for worker 1 op 2 (B0d1) (gradient of "
                           "stage 1, micro-batch 0)"),
            std::string::npos)
      << r.problem;
  EXPECT_NE(r.problem.find("which waits for worker 0 op 2 (F1d0) (activation of stage 0, "
                           "micro-batch 1), which waits for worker 0 op 1 (B0d0) (program order)"),
            std::string::npos)
      << r.problem;
}

TEST(Verify, RejectsMalformedShapes) {
  Schedule s = chimera_4x4();
  s.placement[1][2] = 7;
  expect_problem(s, "placement puts pipe 1 stage 2 on worker 7");
  s = chimera_4x4();
  s.ops.pop_back();
  expect_problem(s, "ops lists 3 workers, workers = 4");
  s = chimera_4x4();
  s.ops[3][0].mbs.clear();
  expect_problem(s, "covers no micro-batch");
  s = chimera_4x4();
  s.ops[3][0].stage = 9;
  expect_problem(s, "stage 9 is not in [0, 4)");
  s = chimera_4x4();
  s.pipe_of.pop_back();
  expect_problem(s, "pipe_of has 3 entries, micro_batches = 4");
}

TEST(Verify, RejectsMixedBackwards) {
  Schedule s = make_schedule(request("1f1b", 2, 2));
  // Add an I for a micro-batch that already has a full B.
  s.ops[1].push_back({OpKind::I, 0, 1, {0}});
  expect_problem(s, "has both a B and a split backward");
}

}  // namespace
}  // namespace chimera::schedule
