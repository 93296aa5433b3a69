// `chimera plan`: pick the parallel layout with the performance model (DESIGN §6), or predict one
// layout (--predict) to compare with a measured run.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "chimera/core/parallel_settings.hpp"

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/io/json_line.hpp"
#include "chimera/plan/io_cost.hpp"
#include "chimera/plan/planner.hpp"
#include "chimera/schedule/simulate.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct PlanOptions {
  std::string model;
  std::vector<std::string> sets;
  int nodes = 0;
  double memory_gib = 0;
  double reserve_gib = 1.0;
  std::string network = "5us,10GB/s";
  int ranks_per_host = 1;
  std::string host_network;  // ALPHA,BETA within a host; free when empty
  std::string costs_file;
  std::string cost;
  double optimizer_ns_per_param = -1;
  int global_batch = 0;
  std::vector<std::string> schemes;
  int max_micro_batch_size = 32;
  bool no_recompute = false;
  bool shard_optimizer = false;
  int top = 10;
  std::string csv;
  std::string memory_csv;
  // --predict: this layout for each of --schemes
  bool predict = false;
  plan::Layout layout{"", "", 0, 0, 1, 0, 0, 1, false, false};
  std::string format = "table";
  // The file system, for the checkpoint I/O figures (none without --fs-bandwidth).
  std::string fs_bandwidth;
  std::string fs_node_bandwidth;
  std::string snapshot_bandwidth = "10GB/s";
  int save_every = 0;
};

plan::Machine machine_of(const PlanOptions& o) {
  CHIMERA_REQUIRE(o.costs_file.empty() != o.cost.empty(),
                  "give the compute costs with exactly one of --costs FILE (per-layer costs of a "
                  "machine) or --cost F:B (emulated stage ops, as `chimera train --compute "
                  "emulate`)");
  plan::Machine m;
  m.network = plan::parse_network(o.network);
  CHIMERA_REQUIRE(o.ranks_per_host >= 1, "--ranks-per-host must be >= 1, got {}", o.ranks_per_host);
  m.network.ranks_per_host = o.ranks_per_host;
  if (!o.host_network.empty()) {
    const plan::Network on_host = plan::parse_network(o.host_network);
    m.network.host_alpha_ms = on_host.alpha_ms;
    m.network.host_beta_ms_per_byte = on_host.beta_ms_per_byte;
  }
  CHIMERA_REQUIRE(o.memory_gib > 0 && std::isfinite(o.memory_gib),
                  "--memory must be > 0 GiB, got {}", o.memory_gib);
  CHIMERA_REQUIRE(o.reserve_gib >= 0 && o.reserve_gib < o.memory_gib,
                  "--reserve {} GiB must be >= 0 and less than --memory {} GiB", o.reserve_gib,
                  o.memory_gib);
  m.memory_bytes = o.memory_gib * kGiB;
  m.reserve_bytes = o.reserve_gib * kGiB;
  if (!o.costs_file.empty()) {
    m.compute.layers = plan::load_layer_costs(o.costs_file);
    m.compute.optimizer_ns_per_param = m.compute.layers->optimizer_ns_per_param;
  } else {
    m.compute = plan::ComputeModel::emulated_from(o.cost);
  }
  if (o.optimizer_ns_per_param >= 0) m.compute.optimizer_ns_per_param = o.optimizer_ns_per_param;
  return m;
}

plan::ModelShape shape_of(const PlanOptions& o) {
  Config config = Config::from_file(o.model);
  for (const std::string& s : o.sets) config.set(s);
  // The run config's [parallel] settings are held to the table `train` checks them against.
  const ParallelConfig& p = config.parallel;
  check_scheme_settings({p.scheme, p.variant, p.pipes, p.virtual_stages, p.max_in_flight});
  return plan::ModelShape(config.model, config.data.seq_len);
}

std::string compute_text(const plan::Machine& m, const PlanOptions& o) {
  if (!m.compute.layers) {
    return fmt::format("emulated stage ops F {} ms, B {} ms per micro-batch",
                       m.compute.emulated.forward_ms, m.compute.emulated.backward_ms);
  }
  const plan::LayerCosts& c = *m.compute.layers;
  return fmt::format("{} ({}; block F {} ms, B {} ms at B0={})",
                     c.machine.empty() ? "per-layer costs" : c.machine, o.costs_file,
                     c.block.forward_ms, c.block.backward_ms, c.micro_batch_size);
}

void print_header(const plan::Predictor& p, const PlanOptions& o) {
  const auto& c = p.shape().config();
  const plan::Machine& m = p.machine();
  fmt::print(
      "model    GPT-2 {} blocks, n_embd {}, {} heads, seq_len {}, vocab {}: {:.3g} B "
      "parameters ({})\n",
      c.n_layer, c.n_embd, c.n_head, p.shape().seq_len(), c.vocab_size,
      p.shape().total_params() / 1e9, o.model);
  fmt::print("machine  {:g} GiB per device ({:g} GiB reserved); network {}\n", o.memory_gib,
             o.reserve_gib, plan::describe(m.network));
  fmt::print("compute  {}; AdamW {:g} ns per parameter\n", compute_text(m, o),
             m.compute.optimizer_ns_per_param);
}

// Checkpoint I/O of one layout (--fs-bandwidth): the save stall of each checkpoint.async mode and
// the resume time.
void print_io(const plan::Predictor& predictor, const plan::Prediction& p, const PlanOptions& o) {
  if (o.fs_bandwidth.empty()) return;
  plan::FileSystem fs;
  fs.bytes_per_ms = plan::parse_bandwidth_bytes_per_ms(o.fs_bandwidth, "--fs-bandwidth");
  fs.node_bytes_per_ms =
      o.fs_node_bandwidth.empty()
          ? 1.0 / predictor.machine().network.beta_ms_per_byte
          : plan::parse_bandwidth_bytes_per_ms(o.fs_node_bandwidth, "--fs-node-bandwidth");
  fs.snapshot_bytes_per_ms =
      plan::parse_bandwidth_bytes_per_ms(o.snapshot_bandwidth, "--snapshot-bandwidth");
  CHIMERA_REQUIRE(o.save_every >= 0, "--save-every {}: must be >= 0 (0 = no periodic saves)",
                  o.save_every);
  const plan::IoPrediction io =
      plan::predict_io(predictor.shape().total_params(), p.layout, predictor.machine().network, fs,
                       p.iteration_ms, o.save_every);
  fmt::print(
      "  checkpoint {:.2f} GB, written and read by {} ranks, {} holders per stage; file system "
      "{:.3g} GB/s, {:.3g} GB/s per node\n",
      io.checkpoint_bytes / 1e9, io.writers, io.holders, fs.bytes_per_ms / 1e6,
      fs.node_bytes_per_ms / 1e6);
  fmt::print(
      "  save stall per checkpoint: {:.2f} s with checkpoint.async = false, {:.2f} s with true "
      "(write {:.2f} s in the background{})\n",
      io.sync_stall_ms / 1e3, io.async_stall_ms / 1e3, io.write_ms / 1e3,
      o.save_every > 0 ? fmt::format(", {} steps = {:.2f} s between saves", o.save_every,
                                     o.save_every * p.iteration_ms / 1e3)
                       : std::string());
  fmt::print(
      "  resume: {:.2f} s (read once {:.2f} s + broadcast to the holders {:.2f} s; every "
      "holder reading its part would take {:.2f} s)\n",
      io.resume_ms() / 1e3, io.resume_read_ms / 1e3, io.resume_broadcast_ms / 1e3,
      io.every_holder_reads_ms / 1e3);
}

std::string row(const plan::Prediction& p) {
  const plan::Layout& l = p.layout;
  return fmt::format(
      "{:<22} {:>5} {:>4} {:>3} {:>5} {:>4} {:>11.1f} {:>11.1f} {:>7.1f}% "
      "{:>8.1f} {:>9.1f} {:>8.2f}",
      l.scheme_label(), l.W, l.D, l.B, l.N, l.recompute ? "yes" : "no", p.iteration_ms,
      p.samples_per_s, 100 * p.bubble_ratio, p.p2p_ms, p.allreduce_exposed_ms,
      p.peak_memory_bytes / kGiB);
}

constexpr const char* kRowHeader =
    "scheme                     W    D   B     N  rcp     iter ms   samples/s  bubble   p2p ms  "
    "allred ms  mem GiB";

void write_csv(const std::string& path, const std::vector<plan::Prediction>& ps) {
  std::ofstream out(path);
  CHIMERA_REQUIRE(out.good(), "cannot write '{}'", path);
  out << "scheme,variant,pipes,virtual,W,D,N,B,recompute,iteration_ms,samples_per_s,work_ms,"
         "bubble_ms,p2p_ms,allreduce_exposed_ms,allreduce_ms,optimizer_ms,bubble_ratio,"
         "peak_memory_bytes,shard_optimizer,gather_exposed_ms,gather_ms\n";
  for (const plan::Prediction& p : ps) {
    const plan::Layout& l = p.layout;
    out << fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},"
        "{:.6g},{:.6g},{:.6g},{:.0f},{},{:.6g},{:.6g}\n",
        l.scheme, l.variant, l.pipes, l.virtual_stages, l.W, l.D, l.N, l.B, l.recompute ? 1 : 0,
        p.iteration_ms, p.samples_per_s, p.work_ms, p.bubble_ms, p.p2p_ms, p.allreduce_exposed_ms,
        p.allreduce_ms, p.optimizer_ms, p.bubble_ratio, p.peak_memory_bytes,
        l.shard_optimizer ? 1 : 0, p.gather_exposed_ms, p.gather_ms);
  }
  CHIMERA_CHECK(out.good(), "writing '{}' failed", path);
}

// Per worker memory of each prediction (analysis/plot.py memory --plan-csv reads it).
void write_memory_csv(const std::string& path, const std::vector<plan::Prediction>& ps) {
  std::ofstream out(path);
  CHIMERA_REQUIRE(out.good(), "cannot write '{}'", path);
  out << "scheme,layout,worker,weights_bytes,gradients_bytes,optimizer_bytes,activations_bytes,"
         "workspace_bytes\n";
  for (const plan::Prediction& p : ps) {
    const plan::Layout& l = p.layout;
    const std::string layout =
        fmt::format("W={} D={} B={} N={}{}", l.W, l.D, l.B, l.N, l.recompute ? " recompute" : "");
    for (std::size_t w = 0; w < p.memory.size(); ++w) {
      const plan::WorkerMemory& m = p.memory[w];
      out << fmt::format("{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f}\n", l.scheme_label(), layout,
                         w, m.weights, m.gradients, m.optimizer, m.activations, m.workspace);
    }
  }
  CHIMERA_CHECK(out.good(), "writing '{}' failed", path);
}

// Six significant digits, as these lines have always carried: a prediction is no more exact.
double significant6(double x) {
  const std::string text = fmt::format("{:.6g}", x);
  double rounded = x;
  std::from_chars(text.data(), text.data() + text.size(), rounded);
  return rounded;
}

std::string json_line(const plan::Prediction& p) {
  const plan::Layout& l = p.layout;
  nlohmann::ordered_json j;
  j["scheme"] = l.scheme;
  j["variant"] = l.variant;
  j["pipes"] = l.pipes;
  j["virtual"] = l.virtual_stages;
  j["W"] = l.W;
  j["D"] = l.D;
  j["N"] = l.N;
  j["B"] = l.B;
  j["recompute"] = l.recompute;
  j["shard_optimizer"] = l.shard_optimizer;
  j["iteration_ms"] = significant6(p.iteration_ms);
  j["work_ms"] = significant6(p.work_ms);
  j["bubble_ms"] = significant6(p.bubble_ms);
  j["p2p_ms"] = significant6(p.p2p_ms);
  j["allreduce_exposed_ms"] = significant6(p.allreduce_exposed_ms);
  j["allreduce_ms"] = significant6(p.allreduce_ms);
  j["gather_exposed_ms"] = significant6(p.gather_exposed_ms);
  j["gather_ms"] = significant6(p.gather_ms);
  j["optimizer_ms"] = significant6(p.optimizer_ms);
  j["bubble_ratio"] = significant6(p.bubble_ratio);
  j["samples_per_s"] = significant6(p.samples_per_s);
  j["peak_memory_bytes"] = std::llround(p.peak_memory_bytes);
  j["fits"] = p.fits;
  return io::json_object_line(j) + "\n";
}

int run_predict(const PlanOptions& o) {
  CHIMERA_REQUIRE(o.layout.D >= 1 && o.layout.N >= 1,
                  "--predict needs the layout: -W w -D d -N n [-B b] [--recompute]");
  CHIMERA_REQUIRE(o.nodes == 0 || o.nodes == o.layout.nodes(),
                  "--nodes {} disagrees with W x D = {} x {} = {}", o.nodes, o.layout.W, o.layout.D,
                  o.layout.nodes());
  CHIMERA_REQUIRE(o.global_batch == 0 || o.global_batch == o.layout.global_batch(),
                  "--global-batch {} disagrees with W x N x B = {}", o.global_batch,
                  o.layout.global_batch());
  plan::Predictor predictor(shape_of(o), machine_of(o));
  std::vector<plan::Prediction> predictions;
  for (const std::string& spec :
       o.schemes.empty() ? std::vector<std::string>{"chimera"} : o.schemes) {
    const plan::SchemeChoice c = plan::parse_scheme_choice(spec);
    plan::Layout l = o.layout;
    l.shard_optimizer = o.shard_optimizer;
    l.scheme = c.scheme;
    l.variant = c.variant;
    l.pipes = c.pipes;
    l.virtual_stages = c.virtual_stages;
    predictions.push_back(predictor(l));
  }
  if (!o.memory_csv.empty()) write_memory_csv(o.memory_csv, predictions);
  if (o.format == "json") {
    for (const plan::Prediction& p : predictions) fmt::print("{}", json_line(p));
    return 0;
  }
  print_header(predictor, o);
  fmt::print("\n{}\n", kRowHeader);
  for (const plan::Prediction& p : predictions) fmt::print("{}\n", row(p));
  for (const plan::Prediction& p : predictions) {
    const bool sharded = p.layout.shard_optimizer;
    fmt::print(
        "\n{}: iteration {:.2f} ms = work {:.2f} + bubbles {:.2f} + p2p {:.2f}{} + exposed "
        "{} {:.2f} + optimizer {:.2f}\n",
        p.layout.scheme_label(), p.iteration_ms, p.work_ms, p.bubble_ms, p.p2p_ms,
        sharded ? fmt::format(" + weight gather waits {:.2f}", p.gather_exposed_ms) : "",
        sharded ? "reduce-scatter" : "allreduce", p.allreduce_exposed_ms, p.optimizer_ms);
    fmt::print(
        "  {} {:.2f} ms in all, {:.0f}% hidden behind the backward tail{}\n",
        sharded ? "reduce-scatter" : "allreduce", p.allreduce_ms,
        p.allreduce_ms > 0 ? 100 * p.allreduce_hidden_ms / p.allreduce_ms : 100.0,
        sharded ? fmt::format("; all-gather {:.2f} ms in all, from the step boundary", p.gather_ms)
                : "");
    if (sharded) {  // the same layout with every holder keeping the whole optimizer state
      plan::Layout full_layout = p.layout;
      full_layout.shard_optimizer = false;
      const plan::Prediction full = predictor(full_layout);
      fmt::print(
          "  against full optimizer state: iteration {:.2f} ms (allreduce {:.2f} ms, {:.2f} "
          "exposed; optimizer {:.2f}), peak memory {:.2f} GiB (sharded: {:.2f})\n",
          full.iteration_ms, full.allreduce_ms, full.allreduce_exposed_ms, full.optimizer_ms,
          full.peak_memory_bytes / kGiB, p.peak_memory_bytes / kGiB);
    }
    fmt::print("  memory per worker (GiB):");
    for (const plan::WorkerMemory& m : p.memory) fmt::print(" {:.2f}", m.total() / kGiB);
    fmt::print("{}\n", p.fits ? "" : "  -- does NOT fit");
    print_io(predictor, p, o);
  }
  return 0;
}

int run_plan(const PlanOptions& o) {
  if (o.predict) return run_predict(o);
  CHIMERA_REQUIRE(o.nodes >= 1 && o.global_batch >= 1,
                  "chimera plan needs --nodes P and --global-batch G (or --predict with a layout)");
  plan::PlanRequest request;
  request.nodes = o.nodes;
  request.global_batch = o.global_batch;
  request.max_micro_batch_size = o.max_micro_batch_size;
  request.consider_recompute = !o.no_recompute;
  request.shard_optimizer = o.shard_optimizer;
  if (!o.schemes.empty()) {
    request.schemes.clear();
    for (const std::string& s : o.schemes) request.schemes.push_back(plan::parse_scheme_choice(s));
  }
  plan::Predictor predictor(shape_of(o), machine_of(o));
  const plan::PlanResult result = plan::plan(request, predictor);
  print_header(predictor, o);
  fmt::print(
      "search   {} nodes, global batch {}{}: {} layouts, {} without a valid schedule, {} "
      "over memory, {} fit\n",
      o.nodes, o.global_batch,
      o.shard_optimizer ? ", optimizer state sharded"
                        : ", optimizer state whole on every holder (--shard-optimizer plans the "
                          "sharded state `chimera train` keeps by default)",
      result.layouts, result.invalid, result.over_memory, result.ranked.size());
  if (!o.csv.empty()) write_csv(o.csv, result.ranked);
  if (result.ranked.empty()) {
    fmt::print("\nno layout fits in {:g} GiB per device", o.memory_gib);
    if (!result.first_invalid.empty()) fmt::print(" (e.g. {})", result.first_invalid);
    fmt::print(": more nodes, more memory, or --max-micro-batch-size 1 with recomputation\n");
    return 1;
  }
  fmt::print("\n    {}\n", kRowHeader);
  const std::size_t top =
      std::min<std::size_t>(static_cast<std::size_t>(o.top), result.ranked.size());
  for (std::size_t i = 0; i < top; ++i) fmt::print("{:>3} {}\n", i + 1, row(result.ranked[i]));
  const std::vector<plan::Prediction> best = plan::best_per_scheme(result);
  fmt::print("\nBest layout of each scheme (throughput relative to the best chimera layout):\n");
  const auto chimera = std::find_if(best.begin(), best.end(), [](const plan::Prediction& p) {
    return p.layout.scheme == "chimera";
  });
  for (const plan::Prediction& p : best) {
    const std::string speedup =
        chimera == best.end()
            ? std::string()
            : fmt::format("   chimera is {:.2f}x", chimera->samples_per_s / p.samples_per_s);
    fmt::print("    {}{}\n", row(p), speedup);
  }
  if (!o.fs_bandwidth.empty()) {
    fmt::print("\nCheckpoint I/O of layout 1 ({}, W {} D {}):\n",
               result.ranked.front().layout.scheme_label(), result.ranked.front().layout.W,
               result.ranked.front().layout.D);
    print_io(predictor, result.ranked.front(), o);
  }
  fmt::print("\n{}", plan::explain(result));
  if (!o.memory_csv.empty()) write_memory_csv(o.memory_csv, best);
  return 0;
}

}  // namespace

Run add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand(
      "plan",
      "Pick the parallel layout with the performance model (docs/scaling.md).\n"
      "Tries every W x D = P, micro-batch size B, N = G / (W B), every scheme and variant, with\n"
      "and without recomputation; keeps what fits in memory and ranks it by predicted\n"
      "throughput. An iteration costs the simulated critical path of its forwards and\n"
      "backwards, with alpha + beta * bytes per activation message, plus the gradient\n"
      "allreduce (Rabenseifner) not hidden behind the backward tail, plus the optimizer step\n"
      "(with --shard-optimizer: a reduce-scatter, and an all-gather the first forward waits for).\n"
      "Examples:\n"
      "  chimera plan --model jobscripts/configs/gpt2-1.3b.toml --nodes 2048 --memory 16 \\\n"
      "      --network 10us,8GB/s --costs jobscripts/configs/p100-costs.toml --global-batch 2048\n"
      "  chimera plan --model jobscripts/configs/local.toml --memory 64 --cost 2:4 \\\n"
      "      --network 20us,2GB/s --predict --schemes chimera,1f1b -W 2 -D 4 -N 8");
  sub->add_option("--model", o->model,
                  "run config TOML whose [model] and data.seq_len describe the model")
      ->required();
  sub->add_option("--set", o->sets, "override a key of the model config, e.g. model.n_layer=48");
  sub->add_option("--nodes", o->nodes,
                  "P: devices (one rank each) to plan for (required for the search; with --predict "
                  "optional, checked against W x D)");
  sub->add_option("--memory", o->memory_gib, "memory per device in GiB")->required();
  sub->add_option("--reserve", o->reserve_gib,
                  "GiB per device not available to Chimera: CUDA context, libraries, allocator "
                  "slack (default 1)");
  sub->add_option("--network", o->network,
                  "ALPHA,BETA[,ALLREDUCE][,rendezvous=BYTES][,later-rank-weight=W]: message "
                  "latency (s, ms, us, ns) and "
                  "bandwidth (GB/s, MB/s) or time per byte (ns/B) (default 5us,10GB/s); ALLREDUCE "
                  "rabenseifner (default) or binomial (Open MPI's in-place non-blocking "
                  "allreduce: a reduce and broadcast of the whole buffer; with --shard-optimizer "
                  "libnbc's linear all-gather); rendezvous=BYTES: messages between hosts larger "
                  "than this move only when their sender is in MPI, not while it computes (MPI "
                  "over TCP; `chimera bench p2p` measures it; default: never, as on RDMA "
                  "networks); later-rank-weight=W (0 < W <= 1): where ranks of one host "
                  "(--ranks-per-host) send or receive binomial sums' messages on its link at "
                  "once, each later-started rank's flows weigh W times the one's before (TCP lets "
                  "one process get ahead; `chimera bench sums` fits it; default 1: fair shares)");
  sub->add_option("--ranks-per-host", o->ranks_per_host,
                  "ranks sharing one host and its network link (default 1: a device per node); "
                  "a pipeline group's consecutive ranks share a host, so it must divide D");
  sub->add_option("--host-network", o->host_network,
                  "ALPHA,BETA of a message between two ranks of one host (default: free, memory "
                  "being far faster than the link)");
  sub->add_option(
      "--costs", o->costs_file,
      "per-layer forward/backward costs of the machine (TOML, docs/scaling.md); this or "
      "--cost is required");
  sub->add_option(
      "--cost", o->cost,
      "instead of --costs: every op costs F:B[:W] ms per micro-batch through 1/D of the "
      "model, as in `chimera train --compute emulate --cost F:B[:W]`");
  sub->add_option("--optimizer-ns", o->optimizer_ns_per_param,
                  "AdamW step time per parameter held, ns (default: from --costs, else 0)");
  sub->add_option("--global-batch", o->global_batch,
                  "G: samples per iteration, W x N x B (required for the search; with --predict "
                  "optional, checked against W x N x B)");
  sub->add_option("--schemes", o->schemes,
                  "schemes to try, comma-separated: " + scheme_list() +
                      "; options chimera:VARIANT[:PIPES] and interleaved:V (default: all, with "
                      "chimera direct, doubling, halving, 4 and 8 pipes, interleaved v=2 and 4)")
      ->delimiter(',');
  sub->add_option("--max-micro-batch-size", o->max_micro_batch_size,
                  "largest B to try (default 32)");
  sub->add_flag("--no-recompute", o->no_recompute, "do not consider activation recomputation");
  sub->add_flag("--shard-optimizer", o->shard_optimizer,
                "AdamW moments sharded over each stage's holders, as parallel.shard_optimizer: "
                "a worker keeps 1/(holders x W) of each held stage's moments (Chimera: 1/2W) and "
                "updates that share of the weights; the gradient sum is a reduce-scatter and the "
                "weights come back by an all-gather that the next step's first forward of the "
                "stage waits for. Off by default here, so that a plan's figures are those of "
                "whole state on every holder; `chimera train` shards by default "
                "(parallel.shard_optimizer = true)");
  sub->add_option("--top", o->top, "layouts to list (default 10)");
  sub->add_option("--csv", o->csv, "write every layout that fits, ranked, to this CSV file");
  sub->add_option("--memory-csv", o->memory_csv,
                  "write the per-worker memory of each scheme's best layout (with --predict: of "
                  "each prediction) to this CSV (analysis/plot.py memory --plan-csv)");
  sub->add_flag("--predict", o->predict,
                "instead of searching, predict the layout -W -D -N -B [--recompute] for each of "
                "--schemes (default chimera)");
  sub->add_option("-W", o->layout.W, "--predict: data-parallel replicas (default 1)");
  sub->add_option("-D,--stages", o->layout.D, "--predict: pipeline stages (required)");
  sub->add_option("-N,--micro-batches", o->layout.N,
                  "--predict: micro-batches per group (required)");
  sub->add_option("-B,--micro-batch-size", o->layout.B,
                  "--predict: samples per micro-batch (default 1)");
  sub->add_flag("--recompute", o->layout.recompute, "--predict: recompute activations");
  sub->add_option("--fs-bandwidth", o->fs_bandwidth,
                  "the file system's bandwidth for this job, e.g. 100GB/s: also print the "
                  "checkpoint save stall (checkpoint.async false and true) and the resume time");
  sub->add_option("--fs-node-bandwidth", o->fs_node_bandwidth,
                  "one node's link to the file system (default: the --network bandwidth)");
  sub->add_option("--snapshot-bandwidth", o->snapshot_bandwidth,
                  "copy rate of a save's host snapshot (default 10GB/s)");
  sub->add_option("--save-every", o->save_every,
                  "steps between checkpoints (checkpoint.every), for the time a background write "
                  "has before the next save waits (default 0: not counted)");
  sub->add_option("--format", o->format,
                  "--predict output: table (default) or json (one object per scheme and line)")
      ->check(CLI::IsMember({"table", "json"}));
  return [o]() { return run_plan(*o); };
}

}  // namespace chimera::cli
