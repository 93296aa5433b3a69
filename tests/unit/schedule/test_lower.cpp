// Lowering: every message sent once and received once, at the places lower.hpp promises, and the
// programs run to the end under blocking-receive semantics (no deadlock at the program level).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

std::vector<Schedule> sample_schedules() {
  std::vector<Schedule> out;
  for (int D : {2, 4, 6}) {
    for (int N : {D, 2 * D}) {
      out.push_back(make_schedule(request("gpipe", D, N)));
      out.push_back(make_schedule(request("1f1b", D, N)));
      out.push_back(make_schedule(request("gems", D, N)));
      out.push_back(make_schedule(request("zb-h1", D, N)));
      out.push_back(make_schedule(request("zb-v", D, N)));
      if (N >= 2 * D) out.push_back(make_schedule(request("dualpipev", D, N)));
      out.push_back(make_schedule(request("interleaved", D, N, "", 0, 2)));
      out.push_back(make_schedule(request("chimera", D, N, "direct")));
      out.push_back(make_schedule(request("chimera", D, N, "halving")));
      if ((N / 2) % 2 == 0) out.push_back(make_schedule(request("chimera", D, N, "doubling")));
      out.push_back(make_schedule(request("bitpipe", D, N)));
      out.push_back(make_schedule(request("bitpipe-zb", D, N)));
    }
  }
  out.push_back(make_schedule(request("chimera", 8, 16, "direct", 4)));
  out.push_back(make_schedule(request("chimera", 8, 16, "doubling", 4)));
  out.push_back(make_schedule(request("gems", 3, 4)));  // middle worker holds stage 1 twice
  return out;
}

std::string name(const Schedule& s) {
  return s.scheme + " " + s.variant + " D=" + std::to_string(s.workers) +
         " N=" + std::to_string(s.schedule_micro_batches) + " pipes=" + std::to_string(s.pipes());
}

// Does `op` produce `m` (as the sender)?
bool produces(const Op& op, const Message& m) {
  const bool covers = std::find(op.mbs.begin(), op.mbs.end(), m.mb) != op.mbs.end();
  if (!covers || op.pipe != m.pipe || op.stage != m.stage) return false;
  return m.payload == Payload::Activation ? op.kind == OpKind::F
                                          : op.kind == OpKind::B || op.kind == OpKind::I;
}

// Does `op` consume `m` (as the receiver)?
bool consumes(const Op& op, const Message& m) {
  const bool covers = std::find(op.mbs.begin(), op.mbs.end(), m.mb) != op.mbs.end();
  if (!covers || op.pipe != m.pipe) return false;
  return m.payload == Payload::Activation
             ? op.kind == OpKind::F && op.stage == m.stage + 1
             : (op.kind == OpKind::B || op.kind == OpKind::I) && op.stage == m.stage - 1;
}

// `sharded`: the program was lowered for sharded optimizer state (a WaitGather per held stage).
void expect_placement_rules(const Schedule& s, const Program& p, bool sharded = false) {
  const std::string what = name(s);
  ASSERT_EQ(static_cast<int>(p.workers.size()), s.workers) << what;
  std::map<std::tuple<int, int, int, int, int, int>, int> sends, posts, waits;
  auto key = [](const Message& m) {
    return std::tuple(static_cast<int>(m.payload), m.pipe, m.stage, m.mb, m.src, m.dst);
  };
  for (int w = 0; w < s.workers; ++w) {
    const auto& prog = p.workers[w];
    int computed = -1;  // index of the last Compute seen
    std::set<int> ready_stages, gathered;
    int tied = 0;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Instr& in = prog[i];
      switch (in.kind) {
        case InstrKind::Compute:
          ASSERT_EQ(in.op_index, computed + 1) << what << " worker " << w;
          computed = in.op_index;
          break;
        case InstrKind::Send: {
          ASSERT_NE(in.msg.src, in.msg.dst) << what;
          ASSERT_EQ(in.msg.src, w) << what;
          ASSERT_GE(computed, 0) << what;
          ASSERT_TRUE(produces(s.ops[w][computed], in.msg))
              << what << ": send right after the op that produced it";
          ++sends[key(in.msg)];
          break;
        }
        case InstrKind::PostRecv: {
          ASSERT_EQ(in.msg.dst, w) << what;
          ASSERT_NE(in.msg.src, in.msg.dst) << what;
          // Posted one op ahead: for the op after the next compute, never earlier.
          const int consumer = computed + 2;
          const bool for_next = computed + 1 < static_cast<int>(s.ops[w].size()) &&
                                consumes(s.ops[w][computed + 1], in.msg) && computed == -1;
          ASSERT_TRUE(for_next || (consumer < static_cast<int>(s.ops[w].size()) &&
                                   consumes(s.ops[w][consumer], in.msg)))
              << what << " worker " << w << ": receive posted for the wrong op";
          ++posts[key(in.msg)];
          break;
        }
        case InstrKind::WaitRecv: {
          ASSERT_EQ(in.msg.dst, w) << what;
          ASSERT_GT(posts[key(in.msg)], 0) << what << ": wait before post";
          // Right before the compute that consumes it: only waits until that compute.
          std::size_t j = i;
          while (prog[j].kind == InstrKind::WaitRecv || prog[j].kind == InstrKind::WaitGather) ++j;
          ASSERT_EQ(prog[j].kind, InstrKind::Compute) << what;
          ASSERT_TRUE(consumes(s.ops[w][prog[j].op_index], in.msg)) << what;
          ++waits[key(in.msg)];
          break;
        }
        case InstrKind::GradReady: {
          ASSERT_TRUE(ready_stages.insert(in.stage).second) << what << ": GradReady twice";
          // After the last B/W of that stage, and only sends in between.
          const Op& last = s.ops[w][computed];
          ASSERT_EQ(last.stage, in.stage) << what;
          ASSERT_TRUE(last.kind == OpKind::B || last.kind == OpKind::W) << what;
          for (int k = computed + 1; k < static_cast<int>(s.ops[w].size()); ++k) {
            const Op& later = s.ops[w][k];
            ASSERT_FALSE(later.stage == in.stage &&
                         (later.kind == OpKind::B || later.kind == OpKind::W))
                << what;
          }
          break;
        }
        case InstrKind::TiedGradReady: {
          // Once, right after the GradReady of the later of the worker's two tied ends.
          ASSERT_TRUE(i > 0 && prog[i - 1].kind == InstrKind::GradReady) << what;
          const int end = prog[i - 1].stage;
          ASSERT_TRUE(end == 0 || end == s.stages - 1) << what;
          for (const int other : {0, s.stages - 1}) {
            ASSERT_TRUE(ready_stages.count(other) > 0 ||
                        std::none_of(s.ops[w].begin(), s.ops[w].end(),
                                     [&](const Op& op) { return op.stage == other; }))
                << what << ": tied sum before stage " << other << " is final";
          }
          ++tied;
          break;
        }
        case InstrKind::WaitSums:
          ASSERT_EQ(i + 1, prog.size()) << what << ": WaitSums is last";
          break;
        case InstrKind::WaitGather: {
          ASSERT_TRUE(gathered.insert(in.stage).second) << what << ": WaitGather twice";
          // Right before the worker's first op of the stage, after that op's waits.
          ASSERT_TRUE(i + 1 < prog.size() && prog[i + 1].kind == InstrKind::Compute) << what;
          ASSERT_EQ(s.ops[w][prog[i + 1].op_index].stage, in.stage) << what;
          for (int k = 0; k <= computed; ++k) ASSERT_NE(s.ops[w][k].stage, in.stage) << what;
          break;
        }
      }
    }
    const bool holds_an_end = std::any_of(s.ops[w].begin(), s.ops[w].end(), [&](const Op& op) {
      return op.stage == 0 || op.stage == s.stages - 1;
    });
    EXPECT_EQ(tied, holds_an_end ? 1 : 0) << what << " worker " << w;
    ASSERT_EQ(prog.back().kind, InstrKind::WaitSums) << what;
    ASSERT_EQ(computed + 1, static_cast<int>(s.ops[w].size())) << what;
    std::set<int> held;
    for (const Op& op : s.ops[w]) held.insert(op.stage);
    EXPECT_EQ(ready_stages, held) << what << " worker " << w;
    EXPECT_EQ(gathered, sharded ? held : std::set<int>{}) << what << " worker " << w;
  }
  EXPECT_EQ(sends, posts) << what;
  EXPECT_EQ(sends, waits) << what;
  for (const auto& [k, count] : sends) EXPECT_EQ(count, 1) << what;
}

// Runs the programs with blocking receives and non-blocking sends; true if all finish.
bool runs_to_completion(const Program& p) {
  std::set<std::tuple<int, int, int, int, int, int>> sent;
  auto key = [](const Message& m) {
    return std::tuple(static_cast<int>(m.payload), m.pipe, m.stage, m.mb, m.src, m.dst);
  };
  std::vector<std::size_t> pc(p.workers.size(), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t w = 0; w < p.workers.size(); ++w) {
      while (pc[w] < p.workers[w].size()) {
        const Instr& in = p.workers[w][pc[w]];
        if (in.kind == InstrKind::WaitRecv && sent.count(key(in.msg)) == 0) break;
        if (in.kind == InstrKind::Send) sent.insert(key(in.msg));
        ++pc[w];
        progress = true;
      }
    }
  }
  for (std::size_t w = 0; w < p.workers.size(); ++w) {
    if (pc[w] != p.workers[w].size()) return false;
  }
  return true;
}

TEST(Lower, MessagesAndGradReadyWhereLowerHppSays) {
  for (const Schedule& s : sample_schedules()) expect_placement_rules(s, lower(s));
}

// One key per message: its index (the MPI tag, the executor's mailbox slot) is below
// message_key_count and tells every message of an iteration apart, the pipe left out.
TEST(Lower, ShardedLoweringAddsOnlyAWaitGatherPerHeldStage) {
  for (const Schedule& s : sample_schedules()) {
    const Program plain = lower(s);
    const Program sharded = lower(s, LowerOptions{.shard_optimizer = true});
    expect_placement_rules(s, sharded, true);
    EXPECT_TRUE(runs_to_completion(sharded)) << name(s);
    const ProgramFacts facts = verify_program(s, sharded);
    EXPECT_TRUE(facts.gathers_weights) << name(s);
    EXPECT_FALSE(verify_program(s, plain).gathers_weights) << name(s);
    // Everything else is the unsharded program, instruction for instruction.
    for (int w = 0; w < s.workers; ++w) {
      std::vector<Instr> rest;
      for (const Instr& in : sharded.workers[w]) {
        if (in.kind != InstrKind::WaitGather) rest.push_back(in);
      }
      EXPECT_EQ(rest, plain.workers[w]) << name(s) << " worker " << w;
    }
  }
  // Chimera with D = 4: every worker holds two stages, one of each pipe, and waits for both.
  const Schedule s = make_schedule(request("chimera", 4, 8));
  for (const auto& code : lower(s, {.shard_optimizer = true}).workers) {
    EXPECT_EQ(std::count_if(code.begin(), code.end(),
                            [](const Instr& in) { return in.kind == InstrKind::WaitGather; }),
              2);
  }
}

TEST(Lower, VerifierRejectsAMissingOrMisplacedWaitGather) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const Program good = lower(s, {.shard_optimizer = true});
  ASSERT_NO_THROW(verify_program(s, good));
  auto first_gather = [](std::vector<Instr>& code) {
    return std::find_if(code.begin(), code.end(),
                        [](const Instr& in) { return in.kind == InstrKind::WaitGather; });
  };
  Program missing = good;  // one worker's stage is never gathered while the others gather
  missing.workers[2].erase(first_gather(missing.workers[2]));
  EXPECT_THROW(verify_program(s, missing), Error);
  Program late = good;  // after the first op of the stage
  auto& code = late.workers[1];
  const auto g = first_gather(code);
  std::rotate(g, g + 1, g + 2);
  EXPECT_THROW(verify_program(s, late), Error);
  Program twice = good;
  twice.workers[0].insert(twice.workers[0].end() - 1, *first_gather(twice.workers[0]));
  EXPECT_THROW(verify_program(s, twice), Error);
}

TEST(Lower, MessageKeysAreDistinctAndBounded) {
  for (const Schedule& s : sample_schedules()) {
    const Program p = lower(s);
    std::set<int> indices;
    std::set<MessageKey> keys;
    for (const auto& code : p.workers) {
      for (const Instr& in : code) {
        if (in.kind != InstrKind::Send) continue;
        const int index = in.msg.key().index(s.schedule_micro_batches);
        EXPECT_GE(index, 0);
        EXPECT_LT(index, message_key_count(s));
        EXPECT_TRUE(indices.insert(index).second) << s.scheme << " " << s.variant;
        keys.insert(in.msg.key());
      }
    }
    EXPECT_EQ(keys.size(), indices.size()) << s.scheme;
  }
}

TEST(Lower, ProgramsRunToCompletion) {
  for (const Schedule& s : sample_schedules()) EXPECT_TRUE(runs_to_completion(lower(s))) << name(s);
}

TEST(Lower, InterpreterDetectsADeadlock) {
  // The interpreter itself must be able to fail: two workers that each wait first.
  Program p;
  const Message a{Payload::Activation, 0, 0, 0, 0, 1};
  const Message b{Payload::Gradient, 0, 1, 0, 1, 0};
  p.workers = {{{InstrKind::PostRecv, -1, b, -1},
                {InstrKind::WaitRecv, -1, b, -1},
                {InstrKind::Send, -1, a, -1}},
               {{InstrKind::PostRecv, -1, a, -1},
                {InstrKind::WaitRecv, -1, a, -1},
                {InstrKind::Send, -1, b, -1}}};
  EXPECT_FALSE(runs_to_completion(p));
}

TEST(Lower, SameWorkerHandOffsHaveNoMessages) {
  // One pipe, three stages; stages 0 and 1 share worker 0.
  Schedule s;
  s.scheme = "custom";
  s.workers = 2;
  s.stages = 3;
  s.schedule_micro_batches = 1;
  s.placement = {{0, 0, 1}};
  s.pipe_of = {0};
  s.ops = {{{OpKind::F, 0, 0, {0}},
            {OpKind::F, 0, 1, {0}},
            {OpKind::B, 0, 1, {0}},
            {OpKind::B, 0, 0, {0}}},
           {{OpKind::F, 0, 2, {0}}, {OpKind::B, 0, 2, {0}}}};
  ASSERT_TRUE(check(s).ok) << check(s).problem;
  const Program p = lower(s);
  expect_placement_rules(s, p);
  std::vector<Message> sent;
  for (const auto& prog : p.workers) {
    for (const Instr& in : prog) {
      if (in.kind == InstrKind::Send) sent.push_back(in.msg);
    }
  }
  EXPECT_EQ(sent, (std::vector<Message>{{Payload::Activation, 0, 1, 0, 0, 1},
                                        {Payload::Gradient, 0, 2, 0, 1, 0}}));
}

TEST(Lower, DoubledForwardSendsOneMessagePerMicroBatch) {
  const Schedule s = make_schedule(request("chimera", 4, 8, "doubling"));
  const Program p = lower(s);
  // Worker 0's first op is F0+1d0: it sends activations of micro-batches 0 and 1 to worker 1.
  ASSERT_EQ(s.ops[0][0], (Op{OpKind::F, 0, 0, {0, 1}}));
  std::vector<Message> sends;
  bool after_first = false;
  for (const Instr& in : p.workers[0]) {
    if (in.kind == InstrKind::Compute) {
      if (after_first) break;
      after_first = true;
    } else if (in.kind == InstrKind::Send && after_first) {
      sends.push_back(in.msg);
    }
  }
  EXPECT_EQ(sends, (std::vector<Message>{{Payload::Activation, 0, 0, 0, 0, 1},
                                         {Payload::Activation, 0, 0, 1, 0, 1}}));
}

TEST(Lower, VerifierAcceptsEveryLoweringAndSaysWhetherSumsHaveOneOrder) {
  for (const Schedule& s : sample_schedules()) {
    EXPECT_NO_THROW(verify_program(s, lower(s))) << name(s);
  }
  // Every anchor's sums start in one global order (NCCL may run them).
  EXPECT_TRUE(verify_program(make_schedule(request("chimera", 4, 8)),
                             lower(make_schedule(request("chimera", 4, 8))))
                  .sums_in_one_order);
}

TEST(Lower, VerifierRejectsATamperedProgram) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const Program good = lower(s);
  auto without = [&](InstrKind kind) {
    Program p = good;
    auto& code = p.workers[1];
    code.erase(
        std::find_if(code.begin(), code.end(), [&](const Instr& in) { return in.kind == kind; }));
    return p;
  };
  EXPECT_THROW(verify_program(s, without(InstrKind::Send)), Error);
  EXPECT_THROW(verify_program(s, without(InstrKind::PostRecv)), Error);
  EXPECT_THROW(verify_program(s, without(InstrKind::GradReady)), Error);
  EXPECT_THROW(verify_program(s, without(InstrKind::WaitSums)), Error);
  Program early = good;  // the tied sum before the worker's stages are final
  auto& code = early.workers[0];
  const auto tied = std::find_if(code.begin(), code.end(), [](const Instr& in) {
    return in.kind == InstrKind::TiedGradReady;
  });
  ASSERT_NE(tied, code.end());
  std::rotate(code.begin() + 2, tied, tied + 1);
  EXPECT_THROW(verify_program(s, early), Error);
}

TEST(Lower, ForwardOnlyProgramsSendActivationsAndSumNothing) {
  for (const Schedule& training : sample_schedules()) {
    const Schedule s = forward_only(training);
    ASSERT_TRUE(check(s).ok) << name(s) << ": " << check(s).problem;
    const Program p = lower(s);
    EXPECT_NO_THROW(verify_program(s, p)) << name(s);
    EXPECT_TRUE(runs_to_completion(p)) << name(s);
    for (const auto& code : p.workers) {
      for (const Instr& in : code) {
        EXPECT_NE(in.kind, InstrKind::GradReady) << name(s);
        EXPECT_NE(in.kind, InstrKind::TiedGradReady) << name(s);
        if (in.kind == InstrKind::Send) {
          EXPECT_EQ(in.msg.payload, Payload::Activation);
        }
      }
    }
  }
  // A backward in a forward-only schedule is an error.
  Schedule bad = make_schedule(request("1f1b", 2, 2));
  bad.forward_only = true;
  EXPECT_FALSE(check(bad).ok);
}

TEST(Lower, RefusesBrokenSchedules) {
  Schedule s = make_schedule(request("1f1b", 4, 4));
  s.ops[3].pop_back();
  EXPECT_THROW(lower(s), Error);
}

}  // namespace
}  // namespace chimera::schedule
