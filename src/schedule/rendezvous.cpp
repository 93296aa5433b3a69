#include "rendezvous.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

#include "chimera/core/error.hpp"
#include "op_graph.hpp"
#include "wait_for.hpp"

namespace chimera::schedule::detail {

namespace {

using Key = std::tuple<int, int, int, int, int, int>;  // payload, pipe, stage, mb, src, dst
Key key(const Message& m) {
  return {static_cast<int>(m.payload), m.pipe, m.stage, m.mb, m.src, m.dst};
}

std::string message_name(const Message& m) {
  return fmt::format("{} of stage {}, micro-batch {}",
                     m.payload == Payload::Activation ? "activation" : "gradient", m.stage, m.mb);
}

// The instructions of all workers as one graph: node = offset[worker] + position.
struct InstrGraph {
  std::vector<int> offset;
  std::vector<int> worker_of;
  std::vector<int> op_of;    // the op whose turn the instruction belongs to
  std::vector<int> message;  // a WaitRecv's send, a Send's post; -1 for other instructions
};

InstrGraph build(const Schedule& s, const Program& program) {
  InstrGraph g;
  g.offset.assign(static_cast<std::size_t>(s.workers) + 1, 0);
  for (int w = 0; w < s.workers; ++w) {
    g.offset[w + 1] = g.offset[w] + static_cast<int>(program.workers[w].size());
  }
  const auto n = static_cast<std::size_t>(g.offset[s.workers]);
  g.worker_of.resize(n);
  g.op_of.resize(n);
  g.message.assign(n, -1);
  std::map<Key, int> send_of, post_of;
  for (int w = 0; w < s.workers; ++w) {
    const auto& code = program.workers[w];
    // Posts and waits belong to the turn of the next compute op, sends and the rest to the last.
    int next = 0;
    for (std::size_t i = 0; i < code.size(); ++i) {
      const int node = g.offset[w] + static_cast<int>(i);
      const Instr& in = code[i];
      g.worker_of[node] = w;
      const bool before = in.kind == InstrKind::PostRecv || in.kind == InstrKind::WaitRecv ||
                          in.kind == InstrKind::WaitGather;
      const int count = static_cast<int>(s.ops[w].size());
      g.op_of[node] = before ? std::min(next, count - 1) : std::max(next - 1, 0);
      if (in.kind == InstrKind::Compute) next = in.op_index + 1;
      if (in.kind == InstrKind::Send) send_of[key(in.msg)] = node;
      if (in.kind == InstrKind::PostRecv) post_of[key(in.msg)] = node;
    }
  }
  for (int w = 0; w < s.workers; ++w) {
    const auto& code = program.workers[w];
    for (std::size_t i = 0; i < code.size(); ++i) {
      const Instr& in = code[i];
      const int node = g.offset[w] + static_cast<int>(i);
      if (in.kind == InstrKind::WaitRecv) g.message[node] = send_of.at(key(in.msg));
      if (in.kind == InstrKind::Send) g.message[node] = post_of.at(key(in.msg));
    }
  }
  return g;
}

std::string where(const Schedule& s, int worker, int op) {
  return fmt::format("worker {} op {} ({})", worker, op, op_label(s, s.ops[worker][op]));
}

}  // namespace

std::string rendezvous_deadlock(const Schedule& s, const Program& program) {
  const InstrGraph g = build(s, program);
  const int n = g.offset.back();
  auto waits_for = [&](int node, auto&& visit) {
    if (node > g.offset[g.worker_of[node]]) visit(node - 1);
    if (g.message[node] >= 0) visit(g.message[node]);
  };
  // Run every worker as far as it can; what is left never runs.
  std::vector<char> done(static_cast<std::size_t>(n), 0);
  std::vector<int> pc(g.offset.begin(), g.offset.end() - 1);
  for (bool progress = true; progress;) {
    progress = false;
    for (int w = 0; w < s.workers; ++w) {
      while (pc[w] < g.offset[w + 1]) {
        bool ready = true;
        waits_for(pc[w], [&](int u) { ready = ready && done[u]; });
        if (!ready) break;
        done[pc[w]++] = 1;
        progress = true;
      }
    }
  }
  std::vector<char> stuck(done.size());
  bool any = false;
  for (std::size_t i = 0; i < done.size(); ++i) {
    stuck[i] = !done[i];
    any = any || stuck[i];
  }
  if (!any) return {};
  const std::vector<int> cycle = shortest_cycle(stuck, waits_for);
  CHIMERA_CHECK(!cycle.empty(), "a lowered program stops without a cyclic wait");

  // Op by op: consecutive instructions of one op's turn are one step.
  std::vector<int> heads;
  for (std::size_t k = 0; k < cycle.size(); ++k) {
    const int prev = cycle[(k + cycle.size() - 1) % cycle.size()];
    const int node = cycle[k];
    if (g.worker_of[prev] != g.worker_of[node] || g.op_of[prev] != g.op_of[node]) {
      heads.push_back(static_cast<int>(k));
    }
  }
  // A cross-worker wait enters each step, so a cycle has at least two.
  CHIMERA_CHECK(heads.size() >= 2, "a rendezvous cycle within one op");
  auto op_text = [&](int node) { return where(s, g.worker_of[node], g.op_of[node]); };
  std::vector<std::string> steps;
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const int into = cycle[static_cast<std::size_t>(heads[(h + 1) % heads.size()])];
    const int from =
        cycle[(static_cast<std::size_t>(heads[(h + 1) % heads.size()]) + cycle.size() - 1) %
              cycle.size()];
    const Instr& in = program.workers[g.worker_of[from]][from - g.offset[g.worker_of[from]]];
    std::string why = "program order";
    if (g.worker_of[from] != g.worker_of[into]) {
      why = in.kind == InstrKind::WaitRecv
                ? message_name(in.msg)
                : fmt::format(
                      "its send of {} completes only when worker {} has posted the "
                      "receive, in op {}'s turn",
                      message_name(in.msg), in.msg.dst, g.op_of[into]);
    }
    steps.push_back(fmt::format("{} ({})", op_text(into), why));
  }
  return "deadlock with rendezvous sends: cyclic wait: " +
         describe_waits(op_text(cycle[static_cast<std::size_t>(heads[0])]), steps);
}

}  // namespace chimera::schedule::detail
