#include "chimera/schedule/lower.hpp"

#include <algorithm>

#include "op_graph.hpp"

namespace chimera::schedule {

namespace {

// Appends one instruction per remote input of op `id`.
void add_receives(const Schedule& s, const detail::OpGraph& g, int id, InstrKind kind,
                  std::vector<Instr>& out) {
  for (const detail::OpInput& in : g.inputs(id)) {
    if (in.remote) out.push_back({kind, -1, detail::input_message(s, g, id, in), -1});
  }
}

}  // namespace

Program lower(const Schedule& schedule, const LowerOptions& options) {
  return detail::lower(schedule, detail::verified_graph(schedule), options);
}

Program detail::lower(const Schedule& schedule, const OpGraph& g, const LowerOptions& options) {
  // The last weight-gradient op (B or W) of each stage on each worker: GradReady follows it.
  std::vector<std::vector<int>> last_grad(static_cast<std::size_t>(schedule.workers),
                                          std::vector<int>(schedule.stages, -1));
  for (int w = 0; w < schedule.workers; ++w) {
    for (int k = 0; k < static_cast<int>(schedule.ops[w].size()); ++k) {
      const Op& op = schedule.ops[w][k];
      if (op.kind == OpKind::B || op.kind == OpKind::W) last_grad[w][op.stage] = k;
    }
  }

  // The tied token table's gradient is final on a worker after its last gradient op of stage 0
  // and of the last stage, whichever of them it holds.
  const int last_stage = schedule.stages - 1;
  auto tied_final_after = [&](int w) {
    return std::max(last_grad[w][0], last_grad[w][last_stage]);
  };

  Program program;
  std::vector<bool> gathered(static_cast<std::size_t>(schedule.stages));  // per worker, reset below
  program.workers.resize(static_cast<std::size_t>(schedule.workers));
  for (int w = 0; w < schedule.workers; ++w) {
    std::vector<Instr>& out = program.workers[w];
    const int count = static_cast<int>(schedule.ops[w].size());
    // Compute, GradReady, and per remote input a post, a wait and (on the producer) a send.
    std::size_t remote_inputs = 0;
    for (int k = 0; k < count; ++k) {
      for (const detail::OpInput& in : g.inputs(g.id(w, k))) remote_inputs += in.remote ? 1 : 0;
    }
    out.reserve(static_cast<std::size_t>(count) + 3 * remote_inputs + 2 * schedule.stages + 2);
    std::fill(gathered.begin(), gathered.end(), false);
    if (count > 0) add_receives(schedule, g, g.id(w, 0), InstrKind::PostRecv, out);
    for (int k = 0; k < count; ++k) {
      const int id = g.id(w, k);
      if (k + 1 < count) add_receives(schedule, g, id + 1, InstrKind::PostRecv, out);
      add_receives(schedule, g, id, InstrKind::WaitRecv, out);
      const int stage = schedule.ops[w][k].stage;
      if (options.shard_optimizer && !gathered[stage]) {
        gathered[stage] = true;
        out.push_back({InstrKind::WaitGather, -1, {}, stage});
      }
      out.push_back({InstrKind::Compute, k, {}, -1});
      int previous = -1;  // a consumer appears once per input it takes from this op
      for (int consumer : g.consumers(id)) {
        if (consumer == previous) continue;
        previous = consumer;
        for (const detail::OpInput& in : g.inputs(consumer)) {
          if (in.producer == id && in.remote) {
            out.push_back(
                {InstrKind::Send, -1, detail::input_message(schedule, g, consumer, in), -1});
          }
        }
      }
      if (last_grad[w][stage] == k) out.push_back({InstrKind::GradReady, -1, {}, stage});
      if ((stage == 0 || stage == last_stage) && tied_final_after(w) == k) {
        out.push_back({InstrKind::TiedGradReady, -1, {}, -1});
      }
    }
    out.push_back({InstrKind::WaitSums, -1, {}, -1});
  }
  return program;
}

}  // namespace chimera::schedule
