#pragma once
// The simulator (docs/DESIGN.md §3): replays a schedule's lowered program (lower.hpp) with costs,
// pricing every instruction as the runtime runs it: every worker runs its instructions in order,
// each op as soon as its inputs are there. The planner calls it many times: build a Simulator once
// per schedule, then run() is one linear pass over the ops.
//
// Cost model:
//   * F, B, I, W are the times of one op on one configured micro-batch through 1/D of the model.
//     An op costs  X * (micro-batches it covers) / mb_split * D / stages:
//     a doubled forward costs 2F, a halved backward B/2, a halving forward (two halves) F,
//     an interleaved op (stages = D*v) X/v.
//   * A message takes alpha + beta * bytes, bytes = activation_bytes or gradient_bytes per
//     configured micro-batch (/ mb_split). It starts when both the send (end of the producing
//     op) and its receive (posted one op ahead, lower.hpp) are there. Links do not contend.
//   * The gradient allreduce of a stage runs over r = (workers holding it) * data_parallel
//     replicas, Rabenseifner: 2*log2(r)*alpha + 2*(r-1)/r*beta*L, L = stage_grad_bytes * D/stages.
//     It starts when every holder has passed its GradReady and its previous allreduce; the
//     allreduces of one worker run one after the other. The tied token table's sum
//     (tied_grad_bytes, over the workers with a TiedGradReady * data_parallel) is priced the same
//     way.
//   * Sharded optimizer state (LowerOptions::shard_optimizer): the sum started at GradReady is the
//     runtime's own ring reduce-scatter on every MPI (comm::ShardedSum),
//     (r-1)*alpha + (r-1)/r*beta*L alone, priced piece by piece: a holder posts the next piece
//     at its next MPI call (a progress point of the op it is in, see `layers`), and a piece
//     crosses the links of every ring edge between hosts, after what is booked on them. Each
//     stage's weights (and the tied table's) come back by
//     an all-gather, log2(r)*alpha + (r-1)/r*beta*L: together they cost about what the allreduce
//     costs. The gathers all start at the step boundary, time 0 here (the previous
//     iteration's optimizer step has just ended), and share each host's link equally (flows that
//     start together do): of k gathers on a link, the shortest ends after k times its own time,
//     and so on; a WaitGather holds its worker until its stage's gather
//     (and for stage 0 and the last stage the tied table's) has ended, so a late gather delays
//     that first op. With binomial_allreduce the all-gather is priced as Open MPI's non-blocking
//     one (libnbc) runs: linear, (r-1)(alpha + beta L/r).
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/lower.hpp"

namespace chimera::schedule {

struct Costs {
  double F = 1.0;               // forward
  double B = 1.0;               // full backward
  double I = 0.5;               // input-gradient part of a split backward
  double W = 0.5;               // weight-gradient part of a split backward
  double alpha = 0.0;           // p2p and allreduce latency per message / step
  double beta = 0.0;            // time per byte
  double activation_bytes = 0;  // one micro-batch's activation between two stages
  double gradient_bytes = 0;    // one micro-batch's input gradient between two stages
  double stage_grad_bytes = 0;  // gradient of 1/D of the model (allreduce size)
  double tied_grad_bytes = 0;   // gradient of the tied token table (its own allreduce)
  int data_parallel = 1;        // W: replicas of the whole pipeline group
  // The allreduce's algorithm: Rabenseifner's (reduce-scatter + allgather), or a binomial
  // reduce then broadcast of the whole buffer, 2 ceil(log2 r) (alpha + beta L) alone: what Open
  // MPI's non-blocking allreduce (libnbc) runs for an in-place sum, as the runtime's is. Binomial
  // sums are priced all at once, message by message as flows on the hosts' links, each rank
  // sending from its own GradReady (the runtime sends eagerly over TCP, so bytes move before
  // their receiver has started its sum), not from the last holder's: one
  // connection (pair of ranks) moves its messages in turn, flows of different connections share
  // a link max-min fairly (a host's later ranks weighted: later_rank_weight), and a link carrying
  // a pipeline message moves no sum's bytes.
  bool binomial_allreduce = false;
  // Ranks per host (the rank layout puts a pipeline group's consecutive workers on one host:
  // rank = replica * D + worker; it must divide D). A message between two hosts takes alpha +
  // beta * n on both hosts' links (sending and receiving side), which carry one message's bytes
  // at a time, so that messages crossing one link at once share its bandwidth; a message within
  // a host takes host_alpha + host_beta * n (memory, 0 unless set). The gradient sums of the
  // ranks on one host share its link too: one at a time (binomial sums: as flows, above). 1:
  // every worker is a host of its own.
  int ranks_per_host = 1;
  double host_alpha = 0.0;
  double host_beta = 0.0;
  // Binomial sums of different ranks of one host crossing its link at once share it unevenly:
  // TCP lets one process's flows get ahead of another's, so that one sum's next messages move on
  // link directions fair shares would have left idle (measured by `chimera bench sums`). On each
  // link direction, the ranks of its host whose messages cross it (senders going out, receivers
  // coming in) are ordered by when their earliest sum there started (then by rank), and the k-th
  // one's flows weigh later_rank_weight^k in the max-min share. 1: max-min fair; a host of one
  // rank shares fairly whatever it is.
  double later_rank_weight = 1.0;
  // Messages between hosts larger than this go by a rendezvous that needs the sender's CPU to
  // move the bytes (MPI over TCP: Open MPI's UCX and ob1 alike). MPI progresses only inside MPI
  // calls, which a computing rank makes at its op's progress points (below): such a message
  // starts moving once the receiver has answered the sender's request (at its wait, or at the
  // next progress point of the op it was computing) and the sender has seen the answer (at the
  // next progress point of the op it started after the send). Infinity (the default): every
  // message moves without the sender, as on RDMA networks, where the receiver reads it.
  double rendezvous_bytes = std::numeric_limits<double>::infinity();
  // Transformer blocks of the model. An op progresses MPI after each of its blocks (the runtime's
  // stages do, StageCompute::set_progress): layers / stages points, evenly spaced, the last at
  // the op's end. 0: at the op's end only.
  int layers = 0;
  // The runtime's ring reduce-scatter (comm::ShardRing) moves each step's shard in pieces of at
  // most this many bytes, each posted once the previous piece has been sent and received.
  double ring_piece_bytes = 1 << 20;

  // F and B with the split backward I = W = B/2.
  static Costs forward_backward(double f, double b);
  // "F:B" or "F:B:W", as every --cost flag takes them: each a number in (0, 1e9], W <= B. W is
  // the weight-gradient part of B when the backward is split (I = B - W); without it I = W = B/2.
  // InputError naming the rule otherwise.
  static Costs parse(const std::string& text);
};

// What one op costs in units of a configured micro-batch through 1/D of the model, per
// micro-batch it covers: 1 / mb_split * D / stages. The simulator and emulated compute both
// scale F, B, I and W by it.
double work_per_micro_batch(const Schedule& schedule);

// The one count of activations held, which every peak and memory cap uses: an F adds what it
// covers, a B (or, with the split, the W, which still needs them) frees it, an I holds on. In
// SimResult::peak_activations' units: configured micro-batches through 1/D of the model.
double activation_delta(const Schedule& schedule, const Op& op);

// Memory caps (--max-in-flight, parallel.max_in_flight, the search's cap) count
// chunk-activations: one micro-batch's activations through 1/(2D) of the model, a chunk of the
// V placements, as V-Half and V-Min are specified (1F1B's first worker holds 2D of them). A unit
// of peak_activations is two chunks.
constexpr double kChunksPerStageUnit = 2;
inline double to_chunks(double stage_units) {
  return stage_units * kChunksPerStageUnit;
}
inline double from_chunks(double chunks) {
  return chunks / kChunksPerStageUnit;
}

struct OpSpan {
  int op = 0;  // index into schedule.ops[worker]
  double start = 0;
  double end = 0;
};

// A stage's gradient sum: an allreduce, or with sharded optimizer state a reduce-scatter and the
// all-gather of the updated weights that the next iteration waits for.
struct StageAllreduce {
  int stage = 0;             // -1: the tied token table
  std::vector<int> holders;  // workers holding a replica of the stage
  int replicas = 0;          // holders * data_parallel
  double ready = 0;          // the last holder's GradReady
  double start = 0;          // the sum
  double end = 0;
  double hidden = 0;        // part of [start, end) before the compute makespan
  double gather_start = 0;  // sharded only: the all-gather, from the step boundary at 0
  double gather_end = 0;
};

struct SimResult {
  double makespan = 0;        // last compute op's end
  double iteration_time = 0;  // max(makespan, last allreduce's end)
  double bubble_ratio = 0;    // idle / (workers * makespan)
  std::vector<double> busy;   // [worker] compute time
  std::vector<double> idle;   // [worker] makespan - busy
  // [worker] most activations held at once, in configured micro-batches through 1/D of the
  // model: an F adds what it covers, a B (or, with the split, a W) frees it. Depends only on the
  // op order.
  std::vector<double> peak_activations;
  std::vector<double> weight_copies;  // [worker] stage replicas held, in units of 1/D of the model
  std::vector<std::vector<OpSpan>> timeline;  // [worker] one span per op, in program order
  std::vector<StageAllreduce> allreduce;      // [stage]
  StageAllreduce tied;                        // the tied table's (no holders: forward-only)
  double allreduce_total = 0;                 // sum of allreduce durations, the tied one's too
  double allreduce_hidden = 0;                // sum of their parts before the makespan
  double allreduce_exposed = 0;               // iteration_time - makespan
  bool sharded = false;                       // the program has WaitGathers
  double gather_total = 0;                    // sum of all-gather durations
  std::vector<double> gather_wait;            // [worker] time held at WaitGathers
};

class Simulator {
 public:
  // Verifies the schedule (throws chimera::Error if it is broken) and prepares the graph of its
  // lowering with `options`.
  explicit Simulator(const Schedule& schedule, const LowerOptions& options = {});
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  // Throws chimera::InputError for negative or non-finite costs.
  SimResult run(const Costs& costs) const;

 private:
  struct Graph;
  std::unique_ptr<const Graph> graph_;  // everything run() needs; the schedule is not kept
};

SimResult simulate(const Schedule& schedule, const Costs& costs, const LowerOptions& options = {});

// Gradient sums posted together, priced as the simulator prices an iteration's binomial sums
// (Costs::binomial_allreduce: libnbc's trees, every message a flow on its hosts' links) with every
// rank starting at 0: what `chimera bench sums` sets beside the same sums measured. `ranks`: the
// world ranks of the sum's communicator, in its order.
struct SumGroup {
  std::vector<int> ranks;
  double bytes = 0;
};
// Each sum's end. `host_of[r]`: world rank r's host (0, 1, ...); Costs' alpha, beta, host_alpha
// and host_beta are used. InputError for a rank outside host_of.
std::vector<double> concurrent_sums_end(const std::vector<SumGroup>& sums,
                                        const std::vector<int>& host_of, const Costs& costs);

}  // namespace chimera::schedule
