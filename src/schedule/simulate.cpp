#include "chimera/schedule/simulate.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <tuple>

#include "binomial_sums.hpp"
#include "chimera/core/error.hpp"
#include "chimera/schedule/lower.hpp"
#include "link_bookings.hpp"
#include "op_graph.hpp"

namespace chimera::schedule {

using detail::LinkBookings;

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

double activation_delta(const Schedule& schedule, const Op& op) {
  const double held = static_cast<double>(op.mbs.size()) * work_per_micro_batch(schedule);
  if (op.kind == OpKind::F) return held;
  return op.kind == OpKind::B || op.kind == OpKind::W ? -held : 0.0;
}

// Everything run() needs, flattened; built once per schedule. The lowered program's
// instructions, in an order in which every WaitRecv comes after its Send: run() replays them in
// one linear pass, pricing each.
namespace {

struct ReplayStep {
  InstrKind kind;
  int worker;
  int arg;  // Compute: op id; PostRecv/WaitRecv/Send: message; GradReady: stage
};

}  // namespace

struct Simulator::Graph {
  using Step = ReplayStep;
  int workers = 0;
  int stages = 0;
  double stage_scale = 1;  // D / stages: an op's share of one worker's model slice
  int mb_split = 1;
  std::vector<Step> steps;
  std::vector<bool> message_is_activation;  // [message]
  // [message] the op its sender computes right after posting it, before any wait (-1: none):
  // the sender makes no MPI progress on it until that op ends.
  std::vector<int> op_after_send;
  std::vector<int> index_of;              // [op id] index in its worker's ops
  std::vector<OpKind> kind;               // [op id]
  std::vector<double> work;               // [op id] micro-batches covered / mb_split * stage_scale
  std::vector<int> offset;                // [worker] first op id
  std::vector<double> peak, copies;       // [worker], order-only statistics
  std::vector<std::vector<int>> holders;  // [stage] workers that sum its gradient
  std::vector<int> tied_holders;          // workers that sum the tied token table's gradient
  bool sharded = false;                   // the program waits for weight gathers
  std::vector<int> gather_order;          // stages (-1: the tied table) by first need
};

namespace {

// The steps of `program` in an order that replays it: each worker's instructions in program
// order, a WaitRecv only once its message's Send is in. Messages are numbered by their Send.
void order_steps(const Program& program, const detail::OpGraph& g, std::vector<ReplayStep>& steps,
                 std::vector<bool>& message_is_activation) {
  // Messages are numbered by their Send.
  std::map<MessageKey, int> number;
  for (const auto& code : program.workers) {
    for (const Instr& in : code) {
      if (in.kind != InstrKind::Send) continue;
      number.emplace(in.msg.key(), static_cast<int>(message_is_activation.size()));
      message_is_activation.push_back(in.msg.payload == Payload::Activation);
    }
  }
  std::vector<bool> sent(message_is_activation.size(), false);
  std::vector<std::size_t> pc(program.workers.size(), 0);
  std::size_t done = 0, total = 0;
  for (const auto& code : program.workers) total += code.size();
  while (done < total) {
    const std::size_t before = done;
    for (std::size_t w = 0; w < program.workers.size(); ++w) {
      const auto& code = program.workers[w];
      for (; pc[w] < code.size(); ++pc[w], ++done) {
        const Instr& in = code[pc[w]];
        int arg = in.stage;
        if (in.kind == InstrKind::Compute) arg = g.id(static_cast<int>(w), in.op_index);
        const bool message = in.kind == InstrKind::PostRecv || in.kind == InstrKind::WaitRecv ||
                             in.kind == InstrKind::Send;
        if (message) {
          const auto it = number.find(in.msg.key());
          CHIMERA_CHECK(it != number.end(), "the lowered program receives a message never sent");
          arg = it->second;
          if (in.kind == InstrKind::WaitRecv && !sent[arg]) break;  // the sender is not there yet
          if (in.kind == InstrKind::Send) sent[arg] = true;
        }
        steps.push_back({in.kind, static_cast<int>(w), arg});
      }
    }
    CHIMERA_CHECK(done > before, "the lowered program cannot be replayed");
  }
}

}  // namespace

Simulator::Simulator(const Schedule& schedule, const LowerOptions& options) {
  const detail::OpGraph g = detail::verified_graph(schedule);
  const Program program = detail::lower(schedule, g, options);
  auto graph = std::make_unique<Graph>();
  Graph& G = *graph;
  G.workers = schedule.workers;
  G.stages = schedule.stages;
  G.stage_scale = static_cast<double>(schedule.workers) / schedule.stages;
  const double work_per_mb = work_per_micro_batch(schedule);
  G.mb_split = schedule.mb_split;
  const int n = g.size();
  G.index_of.resize(static_cast<std::size_t>(n));
  G.kind.resize(static_cast<std::size_t>(n));
  G.work.resize(static_cast<std::size_t>(n));
  G.offset.resize(static_cast<std::size_t>(G.workers) + 1);
  for (int id = 0; id < n; ++id) {
    const Op& op = schedule.ops[g.worker(id)][g.index(id)];
    G.index_of[id] = g.index(id);
    G.kind[id] = op.kind;
    G.work[id] = static_cast<double>(op.mbs.size()) * work_per_mb;
  }
  for (int w = 0; w <= G.workers; ++w) G.offset[w] = w < G.workers ? g.id(w, 0) : n;
  order_steps(program, g, G.steps, G.message_is_activation);
  G.op_after_send.assign(G.message_is_activation.size(), -1);
  {
    std::vector<std::vector<int>> unstarted(static_cast<std::size_t>(G.workers));
    for (const Graph::Step& step : G.steps) {
      auto& mine = unstarted[static_cast<std::size_t>(step.worker)];
      if (step.kind == InstrKind::Send) {
        mine.push_back(step.arg);
      } else if (step.kind == InstrKind::Compute) {
        for (const int m : mine) G.op_after_send[m] = step.arg;
        mine.clear();
      } else if (step.kind == InstrKind::WaitRecv || step.kind == InstrKind::WaitSums ||
                 step.kind == InstrKind::WaitGather) {
        mine.clear();  // the sender waits inside MPI: it progresses the message there
      }
    }
  }

  // Order-only statistics: activations held and stage replicas per worker.
  G.peak.assign(static_cast<std::size_t>(G.workers), 0);
  G.copies.assign(static_cast<std::size_t>(G.workers), 0);
  for (int w = 0; w < G.workers; ++w) {
    double held = 0;
    for (const Op& op : schedule.ops[w]) {
      held += activation_delta(schedule, op);
      G.peak[w] = std::max(G.peak[w], held);
    }
  }
  // Who sums what is what the program says: a GradReady per held stage, a TiedGradReady. The
  // holders come in worker order, as a sum's communicator orders its ranks within a replica.
  G.holders.assign(static_cast<std::size_t>(G.stages), {});
  for (int w = 0; w < G.workers; ++w) {
    for (const Instr& in : program.workers[w]) {
      if (in.kind == InstrKind::GradReady) {
        G.copies[w] += G.stage_scale;
        G.holders[in.stage].push_back(w);
      }
      if (in.kind == InstrKind::TiedGradReady) G.tied_holders.push_back(w);
    }
  }
  // The gathers start at the step boundary in the order the program first needs them: by the
  // earliest op of the stage on any worker (the tied table with its ends, before them).
  G.sharded = options.shard_optimizer;
  if (G.sharded) {
    const int none = std::numeric_limits<int>::max();
    std::vector<int> need(static_cast<std::size_t>(G.stages), none);
    for (int w = 0; w < G.workers; ++w) {
      for (int id = G.offset[w]; id < G.offset[w + 1]; ++id) {
        int& first = need[schedule.ops[w][G.index_of[id]].stage];
        first = std::min(first, G.index_of[id]);
      }
    }
    std::vector<std::pair<int, int>> by_need;  // (first need, stage)
    for (int st = 0; st < G.stages; ++st) by_need.emplace_back(need[st], st);
    if (!G.tied_holders.empty()) by_need.emplace_back(std::min(need[0], need[G.stages - 1]), -1);
    std::sort(by_need.begin(), by_need.end());
    for (const auto& [first, st] : by_need) G.gather_order.push_back(st);
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
                                                   {"stage_grad_bytes", c.stage_grad_bytes},
                                                   {"tied_grad_bytes", c.tied_grad_bytes}};
  for (const auto& [name, v] : values) {
    CHIMERA_REQUIRE(std::isfinite(v) && v >= 0, "cost {} = {} must be a finite number >= 0", name,
                    v);
  }
  CHIMERA_REQUIRE(c.data_parallel >= 1, "data_parallel = {} must be >= 1", c.data_parallel);
  CHIMERA_REQUIRE(c.layers >= 0, "cost layers = {} must be >= 0", c.layers);
  CHIMERA_REQUIRE(c.ring_piece_bytes > 0, "cost ring_piece_bytes = {} must be > 0",
                  c.ring_piece_bytes);
  CHIMERA_REQUIRE(c.rendezvous_bytes >= 0, "cost rendezvous_bytes = {} must be >= 0",
                  c.rendezvous_bytes);
  CHIMERA_REQUIRE(std::isfinite(c.host_alpha) && c.host_alpha >= 0 && std::isfinite(c.host_beta) &&
                      c.host_beta >= 0,
                  "cost host_alpha = {}, host_beta = {} must be finite numbers >= 0", c.host_alpha,
                  c.host_beta);
}

// Books `length` on every link of `links` at the first time from `ready` on at which all are free
// for it; returns that time.
double book_together(std::span<LinkBookings* const> links, double ready, double length) {
  double t = ready;
  for (bool moved = true; moved;) {
    moved = false;
    for (const LinkBookings* link : links) {
      const double free = link->first_free(t, length);
      if (free != t) {
        t = free;
        moved = true;
      }
    }
  }
  for (LinkBookings* link : links) link->book(t, length);
  return t;
}

// When a message of `length` link time, ready at `ready`, is through both links: the first time
// both are free for it, found by moving to the later of the two until they agree.
double cross_links(LinkBookings& out, LinkBookings& in, double ready, double length) {
  const std::array<LinkBookings*, 2> links{&out, &in};
  return book_together(links, ready, length) + length;
}

// The allreduce over r ranks of L bytes: Rabenseifner's (reduce-scatter + allgather), or a
// binomial reduce and broadcast of the whole buffer (Costs::binomial_allreduce).
double allreduce_time(int r, double bytes, const Costs& c) {
  if (r <= 1) return 0;
  if (c.binomial_allreduce)
    return 2 * std::ceil(std::log2(static_cast<double>(r))) * (c.alpha + c.beta * bytes);
  return 2 * std::log2(static_cast<double>(r)) * c.alpha + 2.0 * (r - 1) / r * c.beta * bytes;
}

// Half of Rabenseifner's allreduce: log2(r) alpha + (r-1)/r beta L; with binomial_allreduce,
// libnbc's linear all-gather (simulate.hpp).
double allgather_time(int r, double bytes, const Costs& c) {
  if (r <= 1) return 0;
  if (c.binomial_allreduce) return (r - 1) * (c.alpha + c.beta * bytes / r);
  return std::log2(static_cast<double>(r)) * c.alpha + (r - 1.0) / r * c.beta * bytes;
}

// The runtime's ring reduce-scatter (comm::ShardRing) of `bytes` over `ranks` ranks, the sum's in
// world-rank order (replica-major over the holders `workers`, in worker order), from `start`:
// r - 1 steps, each in pieces of at most ring_piece_bytes of the step's shard. Every rank posts a
// piece once it has sent and received the one before, at its next MPI call (`next_call(w, t)`):
// the holders' timelines stand for their replicas', so a piece is posted at the latest of the
// holders' next calls. It then crosses every ring edge between hosts at once, each edge's
// sending and receiving link (replica 0's stand for all: they carry the same bookings), after
// what is booked there; so concurrent rings interleave their pieces on a shared link. Returns
// when the last piece has arrived.
template <class NextCall, class HostOf>
double ring_reduce_scatter_end(const std::vector<int>& workers, int ranks, double bytes,
                               double start, const Costs& c, HostOf host, NextCall next_call,
                               std::vector<LinkBookings>& out, std::vector<LinkBookings>& in) {
  if (ranks <= 1 || workers.empty()) return start;
  const auto per_replica = static_cast<int>(workers.size());
  std::vector<LinkBookings*> links;
  const auto add_link = [&links](LinkBookings* link) {
    if (std::find(links.begin(), links.end(), link) == links.end()) links.push_back(link);
  };
  for (int i = 0; i < ranks; ++i) {
    const int from = workers[static_cast<std::size_t>(i % per_replica)];
    const int to = workers[static_cast<std::size_t>((i + 1) % per_replica)];
    const bool same_replica = i / per_replica == (i + 1) % ranks / per_replica;
    if (same_replica && host(from) == host(to)) continue;
    add_link(&out[static_cast<std::size_t>(host(from))]);
    add_link(&in[static_cast<std::size_t>(host(to))]);
  }
  const double shard = bytes / ranks;
  const int pieces = std::max(1, static_cast<int>(std::ceil(shard / c.ring_piece_bytes)));
  double t = start;
  for (int step = 0; step < ranks - 1; ++step) {
    for (int k = 0; k < pieces; ++k) {
      const double piece = std::min(c.ring_piece_bytes, shard - k * c.ring_piece_bytes);
      // The first piece is posted as the sum starts (at the last holder's GradReady).
      double post_at = t;
      if (step > 0 || k > 0) {
        for (const int w : workers) post_at = std::max(post_at, next_call(w, t));
      }
      if (links.empty()) {
        t = post_at + c.host_alpha + c.host_beta * piece;
      } else {
        const double length = c.beta * piece;
        t = book_together(links, post_at, length) + length + c.alpha;
      }
    }
  }
  return t;
}

}  // namespace

SimResult Simulator::run(const Costs& costs) const {
  require_costs(costs);
  const Graph& G = *graph_;
  const std::size_t n = G.kind.size();
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
  const int per_host = costs.ranks_per_host;
  CHIMERA_REQUIRE(per_host >= 1 && G.workers % per_host == 0,
                  "{} ranks per host must divide the pipeline's {} workers (a pipeline group's "
                  "consecutive ranks share a host)",
                  per_host, G.workers);
  const auto host = [per_host](int worker) { return worker / per_host; };
  const int hosts = G.workers / per_host;
  // The message sent at a Send, priced at its WaitRecv: who sends it, and to whom.
  std::vector<int> sender(G.message_is_activation.size(), 0);
  for (const Graph::Step& step : G.steps) {
    if (step.kind == InstrKind::Send) sender[step.arg] = step.worker;
  }
  std::vector<LinkBookings> link_out(static_cast<std::size_t>(hosts));
  std::vector<LinkBookings> link_in(static_cast<std::size_t>(hosts));
  // Each op's span, and how many of each worker's ops (its first ones) are priced so far.
  std::vector<double> start(n), end(n);
  std::vector<int> priced(static_cast<std::size_t>(G.workers), 0);
  // An op's progress points: after each of its blocks (Costs::layers), evenly over its span.
  const int points = std::max(1, costs.layers / std::max(1, G.stages));
  const auto next_point = [points](double op_start, double op_end, double t) {
    if (t >= op_end) return t;
    const double spacing = (op_end - op_start) / points;
    const double k = std::ceil((t - op_start) / spacing - 1e-9);
    return std::min(op_end, op_start + std::max(1.0, k) * spacing);
  };
  // The first moment from `t` on at which worker `w` makes an MPI call: t itself outside the ops
  // priced so far, else the next progress point of the op it is in.
  const auto next_progress = [&](int w, double t) {
    const auto first = start.begin() + G.offset[w];
    const auto it = std::upper_bound(first, first + priced[static_cast<std::size_t>(w)], t);
    if (it == first) return t;
    const auto op = static_cast<std::size_t>(std::prev(it) - start.begin());
    return next_point(start[op], end[op], t);
  };
  // When a message ready at `ready` (sent and its receive posted) is in at worker `to`, which
  // waits for it from `waiting`.
  const auto arrival = [&](int message, int to, double ready, double sent, double waiting) {
    const double bytes =
        (G.message_is_activation[message] ? costs.activation_bytes : costs.gradient_bytes) /
        G.mb_split;
    const int from = host(sender[message]);
    if (from == host(to)) return ready + costs.host_alpha + costs.host_beta * bytes;
    double moves = ready;
    if (bytes > costs.rendezvous_bytes) {
      // The receiver answers the request at its wait, or at a progress point of its op ...
      const double answered = ready >= waiting ? ready : next_progress(to, ready);
      // ... and the sender sees the answer at a progress point of the op it started when it
      // posted the send.
      moves = answered;
      if (const int op = G.op_after_send[message]; op >= 0) {
        moves = next_point(sent, sent + G.work[op] * op_cost(G.kind[op]), answered);
      }
    }
    return cross_links(link_out[from], link_in[host(to)], moves, costs.beta * bytes) + costs.alpha;
  };

  SimResult r;
  r.sharded = G.sharded;
  r.allreduce.resize(static_cast<std::size_t>(G.stages));
  for (int st = 0; st < G.stages; ++st) {
    StageAllreduce& a = r.allreduce[st];
    a.stage = st;
    a.holders = G.holders[st];
    a.replicas = static_cast<int>(a.holders.size()) * costs.data_parallel;
  }
  r.tied.stage = -1;
  r.tied.holders = G.tied_holders;
  r.tied.replicas = static_cast<int>(G.tied_holders.size()) * costs.data_parallel;
  const double stage_bytes = costs.stage_grad_bytes * G.stage_scale;
  auto bytes_of = [&](const StageAllreduce& a) {
    return a.stage < 0 ? costs.tied_grad_bytes : stage_bytes;
  };
  auto sum_of = [&](int stage) -> StageAllreduce& {
    return stage < 0 ? r.tied : r.allreduce[static_cast<std::size_t>(stage)];
  };

  // A collective whose replicas all share one host runs in its memory, not on its link.
  Costs on_host = costs;
  on_host.alpha = costs.host_alpha;
  on_host.beta = costs.host_beta;
  const auto within_one_host = [&](const StageAllreduce& a) {
    return costs.data_parallel == 1 && std::all_of(a.holders.begin(), a.holders.end(), [&](int w) {
             return host(w) == host(a.holders.front());
           });
  };
  // The weight gathers all start at the step boundary, so those crossing one host's link share it
  // equally (flows that start together do, measured): on a link carrying gathers of link times
  // d1 <= d2 <= ..., the i-th ends at d1 + ... + d(i-1) + (k - i + 1) d_i of the k, and a gather
  // ends when it has ended on each of its hosts' links. The sums follow, one at a time per link.
  std::vector<double> link_free(static_cast<std::size_t>(hosts), 0);
  std::vector<std::vector<std::pair<double, StageAllreduce*>>> on_link(
      static_cast<std::size_t>(hosts));
  for (const int st : G.gather_order) {
    StageAllreduce& a = sum_of(st);
    a.gather_start = 0.0;
    const bool one_host = within_one_host(a);
    const double duration =
        a.holders.empty() ? 0.0
                          : allgather_time(a.replicas, bytes_of(a), one_host ? on_host : costs);
    a.gather_end = duration;
    r.gather_total += duration;
    if (one_host || duration <= 0.0) continue;
    for (int w : a.holders) {
      auto& gathers = on_link[static_cast<std::size_t>(host(w))];
      if (gathers.empty() || gathers.back().second != &a) gathers.emplace_back(duration, &a);
    }
  }
  for (std::size_t h = 0; h < on_link.size(); ++h) {
    auto& gathers = on_link[h];
    std::stable_sort(gathers.begin(), gathers.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    double t = 0.0, previous = 0.0;
    const auto k = gathers.size();
    for (std::size_t i = 0; i < k; ++i) {
      t += static_cast<double>(k - i) * (gathers[i].first - previous);
      previous = gathers[i].first;
      gathers[i].second->gather_end = std::max(gathers[i].second->gather_end, t);
    }
    link_free[h] = t;
  }
  r.gather_wait.assign(static_cast<std::size_t>(G.workers), 0.0);
  const int last_stage = G.stages - 1;

  // Every instruction at its worker's clock: compute advances it, a wait holds it until the
  // message (sent at its Send, moving once its receive is posted) is in.
  const std::size_t messages = G.message_is_activation.size();
  std::vector<double> clock(static_cast<std::size_t>(G.workers), 0.0);
  std::vector<double> sent(messages), posted(messages);
  // When each holder passed its GradReady: [stage * workers + worker], the tied table's as stage
  // `stages`. A sum is ready at its last holder's (ready_of_sum).
  std::vector<double> holder_ready(static_cast<std::size_t>((G.stages + 1) * G.workers), 0.0);
  const auto ready_at = [&](int sum, int worker) -> double& {
    return holder_ready[static_cast<std::size_t>(sum * G.workers + worker)];
  };
  const auto ready_of_sum = [&](int sum) {
    double ready = 0.0;
    for (int w = 0; w < G.workers; ++w) ready = std::max(ready, ready_at(sum, w));
    return ready;
  };
  for (const Graph::Step& step : G.steps) {
    double& t = clock[static_cast<std::size_t>(step.worker)];
    switch (step.kind) {
      case InstrKind::PostRecv:
        posted[step.arg] = t;
        break;
      case InstrKind::Send:
        sent[step.arg] = t;
        break;
      case InstrKind::WaitRecv:
        t = std::max(t, arrival(step.arg, step.worker, std::max(sent[step.arg], posted[step.arg]),
                                sent[step.arg], t));
        break;
      case InstrKind::Compute:
        start[step.arg] = t;
        t += G.work[step.arg] * op_cost(G.kind[step.arg]);
        end[step.arg] = t;
        ++priced[static_cast<std::size_t>(step.worker)];
        break;
      case InstrKind::GradReady:
        ready_at(step.arg, step.worker) = std::max(ready_at(step.arg, step.worker), t);
        break;
      case InstrKind::TiedGradReady:
        ready_at(G.stages, step.worker) = std::max(ready_at(G.stages, step.worker), t);
        break;
      case InstrKind::WaitSums:
        break;  // the sums are priced below
      case InstrKind::WaitGather: {
        double until = r.allreduce[step.arg].gather_end;
        if (step.arg == 0 || step.arg == last_stage) until = std::max(until, r.tied.gather_end);
        r.gather_wait[step.worker] += std::max(0.0, until - t);
        t = std::max(t, until);
        break;
      }
    }
  }

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

  // The sums: in the order they become ready (the tied table's after stages ready at the same
  // time); the allreduces one at a time per host's link, the sharded rings piece by piece, the
  // binomial trees as flows.
  for (int st = 0; st < G.stages; ++st) r.allreduce[st].ready = ready_of_sum(st);
  r.tied.ready = ready_of_sum(G.stages);
  std::vector<StageAllreduce*> by_ready;
  for (StageAllreduce& a : r.allreduce) by_ready.push_back(&a);
  if (!G.tied_holders.empty()) by_ready.push_back(&r.tied);
  std::stable_sort(
      by_ready.begin(), by_ready.end(),
      [](const StageAllreduce* a, const StageAllreduce* b) { return a->ready < b->ready; });
  r.iteration_time = r.makespan;
  // The binomial sums, all at once as flows on the links of every replica's hosts (replica j's
  // ranks are j * D + worker, so its hosts are j * hosts + host(worker)), which carry that
  // replica's pipeline messages as well: replica 0's bookings, repeated.
  const bool tree = costs.binomial_allreduce && !G.sharded;
  if (tree) {
    std::vector<LinkBookings> replica_out, replica_in;
    std::vector<detail::BinomialSum> sums;
    for (int j = 0; j < costs.data_parallel; ++j) {
      replica_out.insert(replica_out.end(), link_out.begin(), link_out.end());
      replica_in.insert(replica_in.end(), link_in.begin(), link_in.end());
    }
    for (const StageAllreduce* a : by_ready) {
      // The sum's communicator orders its ranks by world rank: replica-major, then worker.
      detail::BinomialSum& sum = sums.emplace_back();
      sum.ready = a->ready;
      sum.bytes = bytes_of(*a);
      const int ready_index = a->stage < 0 ? G.stages : a->stage;
      for (int j = 0; j < costs.data_parallel; ++j) {
        for (const int w : a->holders) {
          sum.ranks.push_back(j * G.workers + w);
          sum.hosts.push_back(j * hosts + host(w));
          sum.rank_ready.push_back(ready_at(ready_index, w));
        }
      }
    }
    const std::vector<double> ends =
        detail::binomial_sums_end(sums, costs, replica_out, replica_in);
    for (std::size_t i = 0; i < by_ready.size(); ++i) {
      by_ready[i]->start = by_ready[i]->ready;
      by_ready[i]->end = ends[i];
    }
  }
  for (StageAllreduce* a : by_ready) {
    if (!tree) {
      a->start = a->ready;
      for (int w : a->holders) a->start = std::max(a->start, link_free[host(w)]);
    }
    if (G.sharded) {
      a->end = ring_reduce_scatter_end(a->holders, a->replicas, bytes_of(*a), a->start, costs, host,
                                       next_progress, link_out, link_in);
    } else if (!tree) {
      const bool one_host = within_one_host(*a);
      const Costs& net = one_host ? on_host : costs;
      const double bytes = bytes_of(*a);
      a->end = a->start + (a->holders.empty() ? 0.0 : allreduce_time(a->replicas, bytes, net));
      for (int w : a->holders) {
        if (!one_host) link_free[host(w)] = a->end;
      }
    }
    const double duration = a->end - a->start;
    a->hidden = std::clamp(r.makespan - a->start, 0.0, duration);
    r.allreduce_total += duration;
    r.allreduce_hidden += a->hidden;
    r.iteration_time = std::max(r.iteration_time, a->end);
  }
  r.allreduce_exposed = r.iteration_time - r.makespan;
  return r;
}

SimResult simulate(const Schedule& schedule, const Costs& costs, const LowerOptions& options) {
  return Simulator(schedule, options).run(costs);
}

}  // namespace chimera::schedule
