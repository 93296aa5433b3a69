#include "chimera/schedule/verify.hpp"

#include <map>
#include <tuple>

#include "chimera/core/error.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/sum_order.hpp"
#include "op_graph.hpp"
#include "rendezvous.hpp"

namespace chimera::schedule {

namespace {

// The first problem: an incomplete or malformed schedule, else a cycle; empty when none.
std::string first_problem(const Schedule& schedule, std::optional<detail::OpGraph>& graph) {
  std::string problem;
  graph = detail::OpGraph::build(schedule, problem);
  if (!graph) return problem;
  const std::vector<int> order = graph->topological_order();
  if (static_cast<int>(order.size()) != graph->size()) {
    return graph->describe_cycle(schedule, order);
  }
  return {};
}

}  // namespace

const char* semantics_name(Semantics semantics) {
  return semantics == Semantics::Eager ? "eager" : "rendezvous";
}

VerifyResult check(const Schedule& schedule) {
  return check(schedule, Semantics::Eager);
}

VerifyResult check(const Schedule& schedule, Semantics semantics) {
  std::optional<detail::OpGraph> graph;
  std::string problem = first_problem(schedule, graph);
  if (problem.empty() && semantics == Semantics::Rendezvous) {
    problem = detail::rendezvous_deadlock(schedule, lower(schedule));
  }
  return {problem.empty(), std::move(problem)};
}

void verify(const Schedule& schedule) {
  detail::verified_graph(schedule);
}

ProgramFacts verify_program(const Schedule& schedule, const Program& program) {
  verify(schedule);
  auto fail = [&](int w, std::size_t i, const std::string& what) {
    throw Error(fmt::format("{}lowered {} program, worker {} instruction {}: {}", rank_prefix(),
                            schedule.scheme, w, i, what));
  };
  CHIMERA_CHECK(static_cast<int>(program.workers.size()) == schedule.workers,
                "lowered program has {} workers, the schedule {}", program.workers.size(),
                schedule.workers);
  using Key = std::tuple<int, int, int, int, int, int>;  // payload, pipe, stage, mb, src, dst
  auto key = [](const Message& m) {
    return Key{static_cast<int>(m.payload), m.pipe, m.stage, m.mb, m.src, m.dst};
  };
  std::map<Key, int> sent, posted, waited;
  const int last = schedule.stages - 1;
  // A program gathers weights (sharded optimizer state) on every worker or on none.
  bool gathers = false;
  for (const auto& code : program.workers) {
    for (const Instr& in : code) gathers = gathers || in.kind == InstrKind::WaitGather;
  }
  for (int w = 0; w < schedule.workers; ++w) {
    const auto& code = program.workers[static_cast<std::size_t>(w)];
    const auto& ops = schedule.ops[static_cast<std::size_t>(w)];
    // The last gradient op of each stage, and which ends of the tied table the worker holds.
    std::map<int, int> last_grad, first_op;
    for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
      const OpKind kind = ops[static_cast<std::size_t>(k)].kind;
      if (kind == OpKind::B || kind == OpKind::W)
        last_grad[ops[static_cast<std::size_t>(k)].stage] = k;
      first_op.emplace(ops[static_cast<std::size_t>(k)].stage, k);
    }
    const bool tied = last_grad.count(0) > 0 || last_grad.count(last) > 0;
    int next_op = 0, tied_seen = 0;
    std::map<int, int> ready_seen, gather_seen;
    for (std::size_t i = 0; i < code.size(); ++i) {
      const Instr& in = code[i];
      const bool remote = in.kind == InstrKind::PostRecv || in.kind == InstrKind::WaitRecv ||
                          in.kind == InstrKind::Send;
      if (remote && (in.msg.src == in.msg.dst ||
                     (in.kind == InstrKind::Send ? in.msg.src : in.msg.dst) != w)) {
        fail(w, i,
             fmt::format("{} of a message from worker {} to worker {}", instr_name(in.kind),
                         in.msg.src, in.msg.dst));
      }
      switch (in.kind) {
        case InstrKind::PostRecv:
          if (++posted[key(in.msg)] > 1) fail(w, i, "a receive posted twice");
          break;
        case InstrKind::WaitRecv:
          if (posted[key(in.msg)] != 1) fail(w, i, "a wait for a receive never posted");
          if (++waited[key(in.msg)] > 1) fail(w, i, "a receive waited for twice");
          break;
        case InstrKind::Send:
          if (++sent[key(in.msg)] > 1) fail(w, i, "a message sent twice");
          break;
        case InstrKind::Compute:
          if (in.op_index != next_op) {
            fail(w, i, fmt::format("computes op {} where op {} is next", in.op_index, next_op));
          }
          ++next_op;
          break;
        case InstrKind::GradReady: {
          const auto it = last_grad.find(in.stage);
          if (it == last_grad.end() || it->second != next_op - 1 || ++ready_seen[in.stage] > 1) {
            fail(w, i,
                 fmt::format("GradReady of stage {} is not right after its last gradient op",
                             in.stage));
          }
          break;
        }
        case InstrKind::TiedGradReady:
          if (!tied || ++tied_seen > 1) fail(w, i, "a TiedGradReady on a worker without the table");
          for (const int end : {0, last}) {
            if (last_grad.count(end) > 0 && ready_seen[end] == 0) {
              fail(w, i,
                   fmt::format("the tied sum starts before stage {}'s gradient is final", end));
            }
          }
          break;
        case InstrKind::WaitSums:
          if (i + 1 != code.size()) fail(w, i, "WaitSums before the end of the program");
          break;
        case InstrKind::WaitGather: {
          const auto it = first_op.find(in.stage);
          const bool before_first = it != first_op.end() && i + 1 < code.size() &&
                                    code[i + 1].kind == InstrKind::Compute &&
                                    code[i + 1].op_index == it->second;
          if (!before_first || ++gather_seen[in.stage] > 1) {
            fail(w, i,
                 fmt::format("WaitGather of stage {} is not right before its first op", in.stage));
          }
          break;
        }
      }
    }
    if (next_op != static_cast<int>(ops.size())) {
      fail(w, code.size(), fmt::format("runs {} of its {} ops", next_op, ops.size()));
    }
    if (code.empty() || code.back().kind != InstrKind::WaitSums)
      fail(w, code.size(), "no WaitSums at the end");
    if (ready_seen.size() != last_grad.size())
      fail(w, code.size(), "a held stage has no GradReady");
    if (tied && tied_seen != 1) fail(w, code.size(), "no TiedGradReady");
    if (gathers && gather_seen.size() != first_op.size())
      fail(w, code.size(), "a held stage has no WaitGather where other workers gather");
  }
  for (const auto& [k, n] : sent) {
    if (posted[k] != 1 || waited[k] != 1) {
      throw Error(
          fmt::format("{}lowered {} program: a message from worker {} to worker {} (stage "
                      "{}, micro-batch {}) is sent but not received",
                      rank_prefix(), schedule.scheme, std::get<4>(k), std::get<5>(k),
                      std::get<2>(k), std::get<3>(k)));
    }
  }
  CHIMERA_CHECK(posted.size() == sent.size(), "lowered {} program: {} receives for {} sends",
                schedule.scheme, posted.size(), sent.size());
  return ProgramFacts{sum_order_consistent(schedule, program), gathers};
}

namespace detail {

OpGraph verified_graph(const Schedule& schedule) {
  std::optional<OpGraph> graph;
  const std::string problem = first_problem(schedule, graph);
  if (!problem.empty()) {
    throw Error(fmt::format("{}invalid {} schedule (D={}, N={}): {}", rank_prefix(),
                            schedule.scheme.empty() ? "unnamed" : schedule.scheme, schedule.workers,
                            schedule.schedule_micro_batches, problem));
  }
  return std::move(*graph);
}

}  // namespace detail
}  // namespace chimera::schedule
