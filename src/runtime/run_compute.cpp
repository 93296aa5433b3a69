#include "run_compute.hpp"

#include "step_watchdog.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/agreement.hpp"
#include "chimera/comm/sharded_sum.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/model/activations.hpp"
#include "chimera/model/worker.hpp"
#include "emulated_stage_compute.hpp"
#include "gpu_paths.hpp"
#include "grad_sums.hpp"
#include "message_staging.hpp"
#include "real_stage_compute.hpp"

namespace chimera::runtime {

namespace {

// Test hook: CHIMERA_TEST_STAGED_SUMS=1 sums a host-memory backend's gradients as a GPU backend
// without NCCL does (GradSumPath::HostStagedMpi: through a staging buffer, by the backend's
// copies), so that the CPU tests run that path's code. Unset in every real run.
bool staged_sums_test_hook() {
  const char* v = std::getenv("CHIMERA_TEST_STAGED_SUMS");
  return v != nullptr && std::string_view(v) == "1";
}

// GPT-2 stages on a backend, with their trainable state.
class RealRunCompute final : public RunCompute {
 public:
  RealRunCompute(const RunPlan& plan, MPI_Comm world, const comm::Communicators& comms,
                 comm::WaitPolicy wait_policy, const comm::NodeLocalRank& local_rank, int rank)
      : plan_(plan) {
    setup_backend(world, comms, local_rank);
    comm::all_or_none(world, [&] { setup_stages(comms, wait_policy, rank); });
  }

  StageCompute& stages() override { return *compute_; }
  comm::SumFactory sum_factory() override {
    if (state_->sharded()) {
      // Host memory: the ring on the buffers themselves; a GPU's: its paths (grad_sums.hpp).
      return [state = &*state_, sums = grad_sums_.get()](
                 const comm::GradBuffer& g, MPI_Comm comm) -> std::unique_ptr<comm::StageSum> {
        float* weights = state->weights(g.stage >= 0 ? g.stage : model::kTiedStage);
        if (sums != nullptr) return sums->make_sharded(g, comm, weights);
        return std::make_unique<comm::ShardedSum>(g, comm, weights);
      };
    }
    if (!grad_sums_) return {};
    return [sums = grad_sums_.get()](const comm::GradBuffer& g, MPI_Comm comm) {
      return sums->make(g, comm);
    };
  }
  std::string describe() const override { return std::string(to_string(ComputeMode::Real)); }
  // A transformer layer's backward is about twice its forward.
  schedule::Costs bubble_costs() const override {
    return schedule::Costs::forward_backward(1.0, 2.0);
  }
  std::optional<IterationPrediction> predicted(int /*ranks_per_host*/) const override {
    return std::nullopt;
  }
  double local_grad_squares() override { return state_->local_grad_squares(); }
  void optimizer_step(int update, double lr, double grad_scale) override {
    state_->optimizer_step(update, lr, grad_scale);
  }
  std::vector<int> nonfinite_grad_stages() const override {
    return state_->nonfinite_grad_stages();
  }
  TrainState& state() override { return *state_; }
  std::optional<std::vector<float>> host_tensor(const std::string& name) const override {
    return state_->host_tensor(name);
  }
  Validation* validation() override { return validation_ ? &*validation_ : nullptr; }

 private:
  // The backend on every rank (agreed: a rank without a GPU fails them all), then, for a GPU
  // backend, the paths of messages and gradient sums from every rank's facts (docs/cuda.md).
  void setup_backend(MPI_Comm world, const comm::Communicators& comms,
                     const comm::NodeLocalRank& local_rank) {
    const Config& config = plan_.config;
    backend::BackendOptions options;
    options.precision = config.runtime.precision;
    options.local_rank = local_rank.rank;
    comm::all_or_none(world,
                      [&] { backend_ = backend::make_backend(config.runtime.backend, options); });
    // runtime.precision = auto lets each rank choose from its own device. A job computes in one
    // precision (data-parallel replicas stay bit-identical only if they compute alike), so
    // where the choices differ every rank runs fp32, which every device runs.
    if (options.precision == "auto") {
      if (const auto d = comm::first_difference(world, backend_->gemm_precision())) {
        log::info(
            "runtime.precision = auto chose {} on rank 0 but {} on rank {}: every rank runs "
            "fp32 GEMMs (set runtime.precision to choose)",
            d->root_value, d->value, d->rank);
        options.precision = "fp32";
        comm::all_or_none(
            world, [&] { backend_ = backend::make_backend(config.runtime.backend, options); });
      }
    }
    // The CPU's bf16 engine may come from a timing probe on each rank (docs/precision.md), which
    // can go either way where the engines are close: every rank runs rank 0's, so that the
    // ranks compute alike.
    if (const auto d = comm::first_difference(world, backend_->gemm_engine())) {
      log::info("bf16 GEMMs: rank 0 chose {} but rank {} chose {}: every rank runs rank 0's",
                d->root_value, d->rank, d->value);
      options.cpu_bf16_engine = d->root_value == "oneDNN" ? "onednn" : "fp32";
      comm::all_or_none(world, [&] {
        if (backend_->gemm_engine() != d->root_value) {
          backend_ = backend::make_backend(config.runtime.backend, options);
        }
      });
    }
    // Says which GEMM precision runs, and why, where runtime.precision = auto chose.
    log::info("backend {}", backend_->description());
    if (backend_->host_memory() && staged_sums_test_hook()) {
      log::warn("test hook CHIMERA_TEST_STAGED_SUMS: gradients summed through host staging");
      grad_sums_ = std::make_unique<GradSums>(*backend_, GradSumPath::HostStagedMpi, comms,
                                              plan_.topology, 0.0);
    }
    if (!backend_->host_memory()) {
      const GpuFacts facts = gather_gpu_facts(world, *backend_, plan_.schedule, plan_.program);
      comm::all_or_none(world, [&] {
        paths_ = choose_gpu_paths(config.runtime.messages, config.runtime.allreduce, facts,
                                  config.runtime.device_mpi_with_nccl);
      });
      log::info("{}", paths_.reason);
      if (config.parallel.shard_optimizer) {
        log::info("sharded optimizer: reduce-scatter and all-gather {}",
                  paths_.sums == GradSumPath::Nccl
                      ? "by NCCL (one reduce and one broadcast per shard, grouped)"
                      : "by the MPI ring on a page-locked host copy");
      }
      grad_sums_ = std::make_unique<GradSums>(*backend_, paths_.sums, comms, plan_.topology,
                                              setup_limit_s(config.runtime.watchdog_s));
    }
  }

  void setup_stages(const comm::Communicators& comms, comm::WaitPolicy wait_policy, int rank) {
    const Config& config = plan_.config;
    worker_ = std::make_unique<model::GPT2Worker>(
        *backend_, plan_.model, plan_.partition, plan_.topology.held,
        model::GPT2Worker::Options{static_cast<int>(plan_.stage_dims.B), plan_.seq_len,
                                   config.parallel.recompute});
    worker_->init_parameters(static_cast<std::uint64_t>(config.train.seed));
    staging_.emplace(*backend_, paths_.messages, worker_->message_floats());
    compute_ = std::make_unique<RealStageCompute>(*worker_, *staging_);
    state_.emplace(plan_, *backend_, *worker_, comms);
    if (config.train.eval_every > 0) {
      validation_.emplace(plan_, *worker_, *staging_, comms, wait_policy, rank);
    }
  }

  const RunPlan& plan_;
  std::unique_ptr<backend::Backend> backend_;
  GpuPaths paths_;  // direct messages, MPI_Iallreduce: a host-memory backend's paths
  std::unique_ptr<GradSums> grad_sums_;  // GPU backends only
  std::unique_ptr<model::GPT2Worker> worker_;
  std::optional<MessageStaging> staging_;
  std::unique_ptr<RealStageCompute> compute_;
  std::optional<TrainState> state_;
  std::optional<Validation> validation_;
};

std::unique_ptr<EmulatedStageCompute> make_emulated(const RunPlan& plan) {
  const model::ParameterLayout layout(plan.model, plan.partition);
  const model::Dims& dims = plan.stage_dims;
  const int last = plan.schedule.stages - 1;
  std::vector<EmulatedStage> held;
  for (const int s : plan.topology.held) {
    const model::StageShape shape{plan.partition.num_blocks(s), s == 0, s == last};
    held.push_back(EmulatedStage{s, layout.stage_floats(s),
                                 static_cast<std::int64_t>(model::activation_bytes_formula(
                                     dims, shape, plan.config.parallel.recompute)),
                                 shape.num_blocks});
  }
  return std::make_unique<EmulatedStageCompute>(
      schedule::Costs::parse(plan.config.runtime.cost),
      schedule::work_per_micro_batch(plan.schedule), static_cast<std::size_t>(dims.N() * dims.C),
      std::move(held), layout.tied_floats(), plan.topology.holds_tied());
}

// Timed waits of runtime.cost in place of the stages; real messages and allreduces, no weights.
class EmulatedRunCompute final : public RunCompute {
 public:
  EmulatedRunCompute(const RunPlan& plan, MPI_Comm world) : plan_(plan) {
    comm::all_or_none(world, [&] { compute_ = make_emulated(plan); });
  }

  StageCompute& stages() override { return *compute_; }
  // With parallel.shard_optimizer the same reduce-scatter and all-gather as real compute; the
  // gradient buffer stands in for the weights (emulation has none).
  comm::SumFactory sum_factory() override {
    if (!plan_.config.parallel.shard_optimizer) return {};
    return [](const comm::GradBuffer& g, MPI_Comm comm) {
      return std::make_unique<comm::ShardedSum>(g, comm, g.data);
    };
  }
  std::string describe() const override {
    return fmt::format("{} (cost {} ms)", to_string(ComputeMode::Emulate),
                       plan_.config.runtime.cost);
  }
  schedule::Costs bubble_costs() const override {
    return schedule::Costs::parse(plan_.config.runtime.cost);
  }
  // The simulator's iteration time for the emulated costs, with runtime.network's messages and
  // sums where it is given.
  std::optional<IterationPrediction> predicted(int ranks_per_host) const override {
    return predict_emulated_iteration(plan_, ranks_per_host);
  }
  double local_grad_squares() override { return 0.0; }
  void optimizer_step(int /*update*/, double /*lr*/, double /*grad_scale*/) override {}
  std::vector<int> nonfinite_grad_stages() const override { return {}; }
  TrainState& state() override {
    throw Error("--compute emulate has no weights: nothing to save or load");
  }
  std::optional<std::vector<float>> host_tensor(const std::string& /*name*/) const override {
    return std::nullopt;
  }
  Validation* validation() override { return nullptr; }

 private:
  const RunPlan& plan_;
  std::unique_ptr<EmulatedStageCompute> compute_;
};

}  // namespace

std::unique_ptr<RunCompute> RunCompute::make(const RunPlan& plan, MPI_Comm world,
                                             const comm::Communicators& comms,
                                             comm::WaitPolicy wait_policy,
                                             const comm::NodeLocalRank& local_rank, int rank) {
  if (plan.config.runtime.compute == ComputeMode::Emulate) {
    return std::make_unique<EmulatedRunCompute>(plan, world);
  }
  return std::make_unique<RealRunCompute>(plan, world, comms, wait_policy, local_rank, rank);
}

}  // namespace chimera::runtime
