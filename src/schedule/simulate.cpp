#include "chimera/schedule/simulate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "chimera/core/error.hpp"
#include "op_graph.hpp"

namespace chimera::schedule {

Costs Costs::forward_backward(double f, double b) {
  Costs c;
  c.F = f;
  c.B = b;
  c.I = b / 2;
  c.W = b / 2;
  return c;
}

Costs Costs::parse(const std::string& text) {
  std::vector<double> parts;
  bool numbers = true;
  for (std::size_t begin = 0; numbers && begin <= text.size();) {
    const std::size_t end = std::min(text.find(':', begin), text.size());
    double x = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, x);
    numbers = ec == std::errc() && ptr == text.data() + end && x > 0 && x <= 1e9;
    parts.push_back(x);
    begin = end + 1;
  }
  CHIMERA_REQUIRE(numbers && (parts.size() == 2 || parts.size() == 3),
                  "--cost '{}': expected F:B or F:B:W (milliseconds per stage op), numbers in "
                  "(0, 1e9], e.g. 10:20 or 10:20:8",
                  text);
  Costs c = forward_backward(parts[0], parts[1]);
  if (parts.size() == 3) {
    CHIMERA_REQUIRE(parts[2] <= parts[1], "--cost '{}': W ({} ms) cannot exceed B ({} ms)", text,
                    parts[2], parts[1]);
    c.W = parts[2];
    c.I = parts[1] - parts[2];
  }
  return c;
}

double work_per_micro_batch(const Schedule& schedule) {
  return (1.0 / schedule.mb_split) *
         (static_cast<double>(schedule.workers) / static_cast<double>(schedule.stages));
}

// Everything run() needs, flattened; built once per schedule.
struct Simulator::Graph {
  struct Input {
    int producer;
    bool remote;
    bool activation;  // else gradient (or a local stash: never remote)
  };
  int workers = 0;
  int stages = 0;
  double stage_scale = 1;  // D / stages: an op's share of one worker's model slice
  int mb_split = 1;
  std::vector<int> order;  // topological
  std::vector<int> worker_of, index_of;
  std::vector<OpKind> kind;
  std::vector<double> work;  // micro-batches covered / mb_split * stage_scale
  std::vector<int> input_begin;
  std::vector<Input> inputs;
  std::vector<int> offset;                     // [worker] first op id
  std::vector<double> peak, copies;            // [worker], order-only statistics
  std::vector<std::vector<int>> holders;       // [stage] workers
  std::vector<std::vector<int>> last_grad_op;  // [stage][holder k] op id of GradReady
};

Simulator::Simulator(const Schedule& schedule) {
  const detail::OpGraph g = detail::verified_graph(schedule);
  auto graph = std::make_unique<Graph>();
  Graph& G = *graph;
  G.workers = schedule.workers;
  G.stages = schedule.stages;
  G.stage_scale = static_cast<double>(schedule.workers) / schedule.stages;
  const double work_per_mb = work_per_micro_batch(schedule);
  G.mb_split = schedule.mb_split;
  G.order = g.topological_order();  // complete: the graph is verified
  const int n = g.size();
  G.worker_of.resize(static_cast<std::size_t>(n));
  G.index_of.resize(static_cast<std::size_t>(n));
  G.kind.resize(static_cast<std::size_t>(n));
  G.work.resize(static_cast<std::size_t>(n));
  G.input_begin.assign(static_cast<std::size_t>(n) + 1, 0);
  G.offset.resize(static_cast<std::size_t>(G.workers) + 1);
  for (int id = 0; id < n; ++id) {
    const int w = g.worker(id);
    const Op& op = schedule.ops[w][g.index(id)];
    G.worker_of[id] = w;
    G.index_of[id] = g.index(id);
    G.kind[id] = op.kind;
    G.work[id] = static_cast<double>(op.mbs.size()) * work_per_mb;
    for (const detail::OpInput& in : g.inputs(id)) {
      G.inputs.push_back({in.producer, in.remote, in.kind == detail::OpInput::Kind::Activation});
    }
    G.input_begin[id + 1] = static_cast<int>(G.inputs.size());
  }
  for (int w = 0; w <= G.workers; ++w) G.offset[w] = w < G.workers ? g.id(w, 0) : n;

  // Order-only statistics: activations held and stage replicas per worker.
  G.peak.assign(static_cast<std::size_t>(G.workers), 0);
  G.copies.assign(static_cast<std::size_t>(G.workers), 0);
  G.holders.assign(static_cast<std::size_t>(G.stages), {});
  G.last_grad_op.assign(static_cast<std::size_t>(G.stages), {});
  for (int w = 0; w < G.workers; ++w) {
    double held = 0;
    std::vector<int> last(static_cast<std::size_t>(G.stages), -1);
    for (int id = G.offset[w]; id < G.offset[w + 1]; ++id) {
      const OpKind k = G.kind[id];
      if (k == OpKind::F) held += G.work[id];
      // A backward frees its activations; with the split, the W (which still needs them) does.
      const bool frees = k == OpKind::B || k == OpKind::W;
      if (frees) held -= G.work[id];
      G.peak[w] = std::max(G.peak[w], held);
      const int stage = schedule.ops[w][G.index_of[id]].stage;
      if (frees) last[stage] = id;
    }
    for (int st = 0; st < G.stages; ++st) {
      if (last[st] < 0) continue;
      G.copies[w] += G.stage_scale;
      G.holders[st].push_back(w);
      G.last_grad_op[st].push_back(last[st]);
    }
  }
  graph_ = std::move(graph);
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

namespace {

void require_costs(const Costs& c) {
  const std::pair<const char*, double> values[] = {{"F", c.F},
                                                   {"B", c.B},
                                                   {"I", c.I},
                                                   {"W", c.W},
                                                   {"alpha", c.alpha},
                                                   {"beta", c.beta},
                                                   {"activation_bytes", c.activation_bytes},
                                                   {"gradient_bytes", c.gradient_bytes},
                                                   {"stage_grad_bytes", c.stage_grad_bytes}};
  for (const auto& [name, v] : values) {
    CHIMERA_REQUIRE(std::isfinite(v) && v >= 0, "cost {} = {} must be a finite number >= 0", name,
                    v);
  }
  CHIMERA_REQUIRE(c.data_parallel >= 1, "data_parallel = {} must be >= 1", c.data_parallel);
}

// Rabenseifner's allreduce (reduce-scatter + allgather) over r ranks of L bytes.
double allreduce_time(int r, double bytes, const Costs& c) {
  if (r <= 1) return 0;
  return 2 * std::log2(static_cast<double>(r)) * c.alpha + 2.0 * (r - 1) / r * c.beta * bytes;
}

}  // namespace

SimResult Simulator::run(const Costs& costs) const {
  require_costs(costs);
  const Graph& G = *graph_;
  const std::size_t n = G.worker_of.size();
  auto op_cost = [&](OpKind k) {
    switch (k) {
      case OpKind::F:
        return costs.F;
      case OpKind::B:
        return costs.B;
      case OpKind::I:
        return costs.I;
      case OpKind::W:
        return costs.W;
    }
    return 0.0;
  };
  const double activation_msg = costs.alpha + costs.beta * costs.activation_bytes / G.mb_split;
  const double gradient_msg = costs.alpha + costs.beta * costs.gradient_bytes / G.mb_split;

  std::vector<double> start(n), end(n);
  for (const int id : G.order) {
    const int k = G.index_of[id];
    double t = k > 0 ? end[id - 1] : 0.0;
    // The receives of op k are posted right after op k-2 (lower.hpp).
    const double posted = k > 1 ? end[id - 2] : 0.0;
    for (int i = G.input_begin[id]; i < G.input_begin[id + 1]; ++i) {
      const Graph::Input& in = G.inputs[i];
      const double ready = end[in.producer];
      t = std::max(
          t, in.remote ? std::max(ready, posted) + (in.activation ? activation_msg : gradient_msg)
                       : ready);
    }
    start[id] = t;
    end[id] = t + G.work[id] * op_cost(G.kind[id]);
  }

  SimResult r;
  r.makespan = n == 0 ? 0.0 : *std::max_element(end.begin(), end.end());
  r.busy.assign(static_cast<std::size_t>(G.workers), 0);
  r.timeline.resize(static_cast<std::size_t>(G.workers));
  for (int w = 0; w < G.workers; ++w) {
    auto& line = r.timeline[w];
    line.reserve(static_cast<std::size_t>(G.offset[w + 1] - G.offset[w]));
    for (int id = G.offset[w]; id < G.offset[w + 1]; ++id) {
      line.push_back({G.index_of[id], start[id], end[id]});
      r.busy[w] += end[id] - start[id];
    }
  }
  r.idle.resize(r.busy.size());
  double idle_total = 0;
  for (std::size_t w = 0; w < r.busy.size(); ++w) {
    r.idle[w] = std::max(0.0, r.makespan - r.busy[w]);
    idle_total += r.idle[w];
  }
  r.bubble_ratio = r.makespan > 0 ? idle_total / (G.workers * r.makespan) : 0.0;
  r.peak_activations = G.peak;
  r.weight_copies = G.copies;

  // Gradient allreduces: in the order their stages become ready; one at a time per worker.
  r.allreduce.resize(static_cast<std::size_t>(G.stages));
  std::vector<int> by_ready(static_cast<std::size_t>(G.stages));
  std::iota(by_ready.begin(), by_ready.end(), 0);
  for (int st = 0; st < G.stages; ++st) {
    StageAllreduce& a = r.allreduce[st];
    a.stage = st;
    a.holders = G.holders[st];
    a.replicas = static_cast<int>(a.holders.size()) * costs.data_parallel;
    for (int id : G.last_grad_op[st]) a.ready = std::max(a.ready, end[id]);
  }
  std::stable_sort(by_ready.begin(), by_ready.end(),
                   [&](int a, int b) { return r.allreduce[a].ready < r.allreduce[b].ready; });
  std::vector<double> link_free(static_cast<std::size_t>(G.workers), 0);
  const double stage_bytes = costs.stage_grad_bytes * G.stage_scale;
  r.iteration_time = r.makespan;
  for (int st : by_ready) {
    StageAllreduce& a = r.allreduce[st];
    a.start = a.ready;
    for (int w : a.holders) a.start = std::max(a.start, link_free[w]);
    const double duration = allreduce_time(a.replicas, stage_bytes, costs);
    a.end = a.start + duration;
    for (int w : a.holders) link_free[w] = a.end;
    a.hidden = std::clamp(r.makespan - a.start, 0.0, duration);
    r.allreduce_total += duration;
    r.allreduce_hidden += a.hidden;
    r.iteration_time = std::max(r.iteration_time, a.end);
  }
  r.allreduce_exposed = r.iteration_time - r.makespan;
  return r;
}

SimResult simulate(const Schedule& schedule, const Costs& costs) {
  return Simulator(schedule).run(costs);
}

}  // namespace chimera::schedule
