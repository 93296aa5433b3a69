// `chimera bench model`: times full training steps (forward, backward, AdamW) of GPT-2, or of one
// stage of a partition, and prints tokens/s, GFLOP/s next to the rate of a large square GEMM at the
// backend's precision, and the memory of parameters, gradients, optimizer state and activations.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_commands.hpp"
#include "chimera/backend/buffer.hpp"
#include "chimera/core/config.hpp"
#include "chimera/core/config_checks.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/optim/adamw.hpp"
#include "chimera/optim/clip.hpp"
#include "kernel_profile.hpp"

namespace chimera::cli {

namespace {

struct BenchModelOptions {
  std::string config_file;
  std::vector<std::string> sets;
  int steps = 5;
  int warmup = 1;
  int stages = 1;
  int stage = 0;
  int sgemm_size = 2048;
  std::string backend;    // overrides runtime.backend
  std::string precision;  // overrides runtime.precision
};

// An n x n x n GEMM through the backend, at its precision, timed once after every training step
// so that the model's rate and the GEMM rate are means over the same stretch of time (other jobs
// on the machine affect both alike).
class GemmProbe {
 public:
  GemmProbe(backend::Backend& be, int n) : be_(be), n_(n) {
    const auto count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    std::vector<float> host(count);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (auto& x : host) x = uniform(rng);
    for (auto* buffer : {&a_, &b_, &c_}) *buffer = backend::DeviceBuffer(be, count * sizeof(float));
    be.copy_from_host(a_.data(), host.data(), a_.bytes());
    be.copy_from_host(b_.data(), host.data(), b_.bytes());
    // The operands never change: as registered weights, a bf16 backend converts them once, in the
    // warm-up call below, so that the rate is the GEMM's alone, not the conversions'.
    be.register_weights(a_.f32(), static_cast<backend::Index>(count));
    be.register_weights(b_.f32(), static_cast<backend::Index>(count));
    seconds();
  }
  double seconds() {
    Stopwatch watch;
    be_.gemm(backend::Trans::No, backend::Trans::No, n_, n_, n_, 1.0F, a_.f32(), n_, b_.f32(), n_,
             0.0F, c_.f32(), n_);
    be_.synchronize();
    return watch.seconds();
  }
  double flops() const { return 2.0 * n_ * static_cast<double>(n_) * n_; }

 private:
  backend::Backend& be_;
  int n_;
  backend::DeviceBuffer a_, b_, c_;
};

// On a machine busier than its CPUs, OpenMP threads that spin while they wait for a descheduled
// team mate waste the busy machine's time: measured 3x slower training steps here. libgomp reads
// the policy when it loads, so only the user can change it; say so when it matters.
void warn_if_spinning_on_a_busy_machine() {
  double load[1] = {0.0};
  const auto cpus = static_cast<double>(std::thread::hardware_concurrency());
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || getloadavg(load, 1) != 1 || load[0] < cpus) {
    return;
  }
  log::warn(
      "the machine is busy (load {:.1f} on {} CPUs): OpenMP threads spin while they wait, "
      "which slows this benchmark down several times; OMP_WAIT_POLICY=passive gives figures "
      "that reflect the program rather than the load",
      load[0], cpus);
}

// What the GEMM probe's rate is, for its output line: its name before "GFLOP/s", how it ran
// (empty, or ending in ", "), and the name of the model/GEMM fraction. fp32 keeps the line that
// earlier outputs and the docs show.
struct GemmLabel {
  std::string rate;      // "sgemm", "bf16 GEMM", ...
  std::string how;       // "", "through oneDNN, ", ...
  std::string fraction;  // "model/sgemm", "model/bf16 GEMM", ...
};

GemmLabel gemm_label(BackendKind kind, const std::string& precision, const std::string& engine) {
  constexpr const char* kFp32Units = "with operands rounded to bf16, then the fp32 GEMM, ";
  if (precision == "fp32") return {"sgemm", "", "model/sgemm"};
  if (precision == "bf16-emulated") {
    // Operands rounded to bf16 on the fp32 units: a test mode, not a speed mode.
    return {"bf16-emulated GEMM", kFp32Units, "model/bf16-emulated GEMM"};
  }
  // The probe runs on the engine the model's GEMMs run on, so the fraction is against that rate.
  const std::string rate = precision + " GEMM";
  if (engine == "fp32 units") return {rate, kFp32Units, "model/" + rate};
  return {rate, kind == BackendKind::Cuda ? "through cuBLAS, " : "through oneDNN, ",
          "model/" + rate};
}

double megabytes(std::size_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

int run_bench_model(const BenchModelOptions& opt) {
  CHIMERA_REQUIRE(opt.sgemm_size >= 0,
                  "--sgemm-size {}: must be >= 0 (the n of the timed n x n x n GEMM; 0 = skip it)",
                  opt.sgemm_size);
  Config config;
  if (opt.config_file.empty()) {
    // The benchmark: L=4, C=256, H=4, T=256, B=4, V=50257 (model defaults + these).
    config.data.seq_len = 256;
    config.parallel.micro_batch_size = 4;
  } else {
    config = Config::from_file(opt.config_file);
  }
  for (const auto& s : opt.sets) config.set(s);
  if (!opt.backend.empty()) config.runtime.backend = parse_enum<BackendKind>(opt.backend);
  if (!opt.precision.empty()) config.runtime.precision = opt.precision;
  CHIMERA_REQUIRE(opt.steps >= 1, "--steps {} must be at least 1", opt.steps);
  CHIMERA_REQUIRE(opt.warmup >= 0, "--warmup {} must not be negative", opt.warmup);
  CHIMERA_REQUIRE(opt.stage >= 0 && opt.stage < opt.stages,
                  "--stage {} must be one of the --stages {} model stages (0..{})", opt.stage,
                  opt.stages, opt.stages - 1);

  const auto model_config = model::GPT2Config::from(config.model);
  const auto partition = model::make_partition(model_config, opt.stages, config.parallel.partition,
                                               config.data.seq_len);
  warn_if_spinning_on_a_busy_machine();
  backend::BackendOptions backend_options;
  backend_options.precision = config.runtime.precision;
  auto device = backend::make_backend(config.runtime.backend, backend_options);
  // Every call of the step timed by kernel class, where calls finish before they return (a GPU's
  // would need a synchronisation each, which would change the step).
  std::unique_ptr<ProfilingBackend> profile;
  if (device->host_memory()) profile = std::make_unique<ProfilingBackend>(*device);
  backend::Backend* be = profile ? profile.get() : device.get();
  const model::GPT2Worker::Options options{config.parallel.micro_batch_size, config.data.seq_len,
                                           config.parallel.recompute};
  model::GPT2Worker worker(*be, model_config, partition, {opt.stage}, options);
  worker.init_parameters(static_cast<std::uint64_t>(config.train.seed));
  check_optimizer_config(config.train);
  const auto adamw = optim::AdamWConfig::from(config.train);

  const model::Dims& d = worker.dims();
  const int s = opt.stage;
  const bool first = partition.is_first(s), last = partition.is_last(s);
  const int blocks = partition.num_blocks(s);

  // Inputs: random tokens and targets; random activations and output gradients between stages.
  std::mt19937 rng(static_cast<std::uint32_t>(config.train.seed));
  std::uniform_int_distribution<std::int32_t> token(0, model_config.vocab_size - 1);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(d.N())), targets(tokens.size());
  for (auto& t : tokens) t = token(rng);
  for (auto& t : targets) t = token(rng);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> host(worker.message_floats());
  const auto random_message = [&](float stddev) {
    backend::DeviceBuffer buffer(*be, host.size() * sizeof(float));
    for (auto& x : host) x = stddev * normal(rng);
    be->copy_from_host(buffer.data(), host.data(), buffer.bytes());
    return buffer;
  };
  backend::DeviceBuffer input = random_message(1.0F), grad_output = random_message(1e-3F);
  backend::DeviceBuffer output(*be, host.size() * sizeof(float)),
      grad_input(*be, host.size() * sizeof(float));

  std::vector<optim::ParamRange> stage_ranges, tied_ranges;
  for (const model::TensorInfo* t : worker.tensors()) {
    (t->stage == model::kTiedStage ? tied_ranges : stage_ranges)
        .push_back({t->offset, t->numel, t->weight_decay});
  }
  optim::AdamWMoments stage_moments(*be, worker.params(s).count);
  optim::AdamWMoments tied_moments(*be, worker.tied_params().count);

  std::unique_ptr<GemmProbe> gemm;
  if (opt.sgemm_size > 0) gemm = std::make_unique<GemmProbe>(*device, opt.sgemm_size);
  double forward_s = 0, backward_s = 0, optimizer_s = 0, reset_s = 0, gemm_s = 0;
  std::size_t activation_bytes = 0;
  for (int step = 0; step < opt.warmup + opt.steps; ++step) {
    // A training step resets its gradients too: counted with the update, so that time/step is
    // the whole step `chimera train` runs.
    if (profile && step == opt.warmup) profile->reset();
    Stopwatch watch;
    worker.zero_grad();
    be->synchronize();
    const double t_zero = watch.seconds();
    watch.reset();
    model::ForwardInput in;
    if (first) in.tokens = tokens;
    if (!first) in.activation = input.f32();
    if (last) in.targets = targets;
    in.loss_scale = 1.0F;
    worker.forward(s, 0, in, last ? nullptr : output.f32());
    be->synchronize();
    const double t_forward = watch.seconds();
    activation_bytes = worker.activation_bytes();
    watch.reset();
    worker.backward(s, 0, last ? nullptr : grad_output.f32(), first ? nullptr : grad_input.f32());
    worker.finalize_tied_grads();
    be->synchronize();
    const double t_backward = watch.seconds();
    watch.reset();
    double sum_sq = optim::sum_of_squares(*be, worker.grads(s).data, worker.grads(s).count);
    if (worker.holds_tied()) {
      sum_sq += optim::sum_of_squares(*be, worker.tied_grads().data, worker.tied_grads().count);
    }
    const double scale = optim::clip_scale(std::sqrt(sum_sq), config.train.grad_clip);
    optim::adamw_step(*be, adamw, step + 1, config.train.lr, scale, worker.params(s).data,
                      worker.grads(s).data, stage_moments, stage_ranges);
    if (worker.holds_tied()) {
      optim::adamw_step(*be, adamw, step + 1, config.train.lr, scale, worker.tied_params().data,
                        worker.tied_grads().data, tied_moments, tied_ranges);
    }
    be->synchronize();
    const double t_optimizer = t_zero + watch.seconds();
    const double t_gemm = gemm ? gemm->seconds() : 0.0;
    if (step >= opt.warmup) {
      forward_s += t_forward;
      backward_s += t_backward;
      optimizer_s += t_optimizer;
      reset_s += t_zero;
      gemm_s += t_gemm;
    }
  }
  const double steps = opt.steps;
  const double step_s = (forward_s + backward_s + optimizer_s) / steps;
  // GEMM FLOPs of a training step (3x the forward's): per token 72 C^2 + 12 T C per block and
  // 6 C V for the head; for the whole model 72 L C^2 + 12 L T C + 6 C V (nanoGPT's count), with
  // the attention's 12 T C scaled to the score products the backend computes (a CPU skips the
  // masked blocks).
  const double N = static_cast<double>(d.N()), C = static_cast<double>(d.C);
  const double attention =
      4.0 * static_cast<double>(d.T) * C * device->attention_products_share(d.T);
  const double flops =
      3.0 * N *
      (blocks * (24.0 * C * C + attention) + (last ? 2.0 * C * static_cast<double>(d.V) : 0.0));
  const double model_gflops = flops / step_s / 1e9;

  const std::size_t param_bytes =
      (worker.params(s).count + worker.tied_params().count) * sizeof(float);
  // A worker holding both tied stages keeps the embedding's part of the wte gradient apart.
  const std::size_t grad_bytes =
      param_bytes + (first && last ? worker.tied_grads().count * sizeof(float) : 0);
  const model::StageShape shape{blocks, first, last};
  const std::size_t formula = model::activation_bytes_formula(d, shape, config.parallel.recompute);

  log::info("chimera bench model: GPT-2 L={} C={} H={} V={} (padded {}), T={} B={}{}",
            model_config.n_layer, model_config.n_embd, model_config.n_head, model_config.vocab_size,
            model_config.padded_vocab_size, d.T, d.B,
            config.parallel.recompute ? ", recompute" : "");
  if (partition.num_stages() > 1) {
    log::info("stage {} of {} (partition {}): {} blocks{}{}", s, partition.num_stages(),
              partition.to_string(), blocks, first ? " + embedding" : "",
              last ? " + final LayerNorm and head" : "");
  }
  log::info("backend {}", be->description());
  log::info("training step (forward + backward + AdamW), mean of {} steps after {} warm-up:",
            opt.steps, opt.warmup);
  log::info(
      "  time/step      {:9.1f} ms  (forward {:.1f}, backward {:.1f}, optimizer {:.1f}: gradient "
      "reset {:.1f}, clipping norm and AdamW {:.1f})",
      step_s * 1e3, forward_s / steps * 1e3, backward_s / steps * 1e3, optimizer_s / steps * 1e3,
      reset_s / steps * 1e3, (optimizer_s - reset_s) / steps * 1e3);
  log::info("  tokens/s       {:9.1f}", N / step_s);
  log::info("  model GFLOP/s  {:9.1f}  ({:.2f} GFLOP per step; {:.2f} TFLOP/s)", model_gflops,
            flops / 1e9, model_gflops / 1e3);
  if (const auto peak = be->peak_flops()) {
    // Model FLOPs utilisation: the model's GEMM FLOPs per second over the device's dense peak.
    log::info("  MFU            {:9.1f} %  (peak {})", 100.0 * flops / step_s / peak->flops_per_s,
              peak->source);
  }
  if (gemm) {
    const double gemm_gflops = gemm->flops() * steps / gemm_s / 1e9;
    const GemmLabel label =
        gemm_label(config.runtime.backend, be->gemm_precision(), be->gemm_engine());
    log::info(
        "  {} GFLOP/s  {:9.1f}  ({}^3 {}after each step, same backend and threads): {} = {:.2f}",
        label.rate, gemm_gflops, opt.sgemm_size, label.how, label.fraction,
        model_gflops / gemm_gflops);
  }
  if (profile) {
    log::info(
        "kernel classes, ms per step (wall time of the backend's calls; the rest of the step "
        "is the program around them):");
    double total = 0;
    for (const double t : profile->seconds()) total += t;
    for (int k = 0; k < static_cast<int>(KernelClass::Count); ++k) {
      const double t = profile->seconds()[static_cast<std::size_t>(k)];
      log::info("  {:<15}{:9.1f} ms  {:5.1f} %", kernel_class_name(static_cast<KernelClass>(k)),
                t / steps * 1e3, 100.0 * t / total);
    }
    log::info("  {:<15}{:9.1f} ms  of the {:.1f} ms step", "all calls", total / steps * 1e3,
              step_s * 1e3);
  } else {
    log::info("kernel classes: not timed on this backend (its calls return before they finish)");
  }
  log::info("memory:");
  log::info("  parameters     {:9.1f} MB", megabytes(param_bytes));
  log::info("  gradients      {:9.1f} MB", megabytes(grad_bytes));
  log::info("  AdamW state    {:9.1f} MB", megabytes(2 * param_bytes));
  log::info("  activations    {:9.1f} MB per micro-batch ({} bytes; closed form {} bytes: {})",
            megabytes(activation_bytes), activation_bytes, formula,
            activation_bytes == formula ? "equal" : "DIFFERENT");
  log::info("  workspace      {:9.1f} MB per worker", megabytes(worker.workspace_bytes()));
  return activation_bytes == formula ? 0 : 1;
}

}  // namespace

BenchEntries add_bench_model(CLI::App& bench) {
  auto opt = std::make_shared<BenchModelOptions>();
  auto* sub = bench.add_subcommand(
      "model",
      "Time full training steps (forward, backward, AdamW) of GPT-2 or of one stage; print "
      "tokens/s, GFLOP/s against the rate of a large GEMM at the same precision, and memory. "
      "Threads: OMP_NUM_THREADS.\n"
      "Without --config: L=4, C=256, H=4, T=256, B=4, V=50257.");
  sub->add_option("--config", opt->config_file,
                  "run config (TOML): [model], data.seq_len, parallel.micro_batch_size, "
                  "parallel.recompute, parallel.partition, [train] AdamW settings")
      ->check(CLI::ExistingFile);
  sub->add_option("--set", opt->sets, "override a config key, e.g. --set model.n_layer=12")
      ->type_name("KEY=VALUE");
  sub->add_option("--backend", opt->backend,
                  "compute backend, cpu or cuda (runtime.backend; cuda prints MFU against the "
                  "GPU's peak, docs/cuda.md)");
  sub->add_option("--precision", opt->precision,
                  "GEMM arithmetic (runtime.precision): fp32, bf16 or auto; cpu also "
                  "bf16-emulated (bf16 numerics on fp32 units, for tests, not for speed), cuda "
                  "also tf32. cpu bf16 needs AMX or AVX-512-BF16");
  sub->add_option("--steps", opt->steps, "timed training steps")->capture_default_str();
  sub->add_option("--warmup", opt->warmup, "untimed steps first")->capture_default_str();
  sub->add_option("--stages", opt->stages,
                  "split the model into this many stages (balanced, or parallel.partition)")
      ->capture_default_str();
  sub->add_option("--stage", opt->stage, "the stage to time (0-based)")->capture_default_str();
  sub->add_option("--sgemm-size", opt->sgemm_size,
                  "n of the n x n x n GEMM timed after each step at the backend's precision "
                  "(sgemm in fp32), whose rate is printed for comparison (0 = skip it; >= 0)")
      ->capture_default_str();
  return {{sub, [opt]() -> int { return run_bench_model(*opt); }}};
}

}  // namespace chimera::cli
