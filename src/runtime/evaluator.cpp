#include "evaluator.hpp"

#include <fmt/format.h>

#include "chimera/data/sampler.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"

namespace chimera::runtime {

Evaluator::Pass::Pass(schedule::Schedule s, const RunPlan& plan, const comm::Communicators& comms,
                      comm::WaitPolicy wait_policy, StageCompute& compute)
    : schedule(std::move(s)),
      program(schedule::lower(schedule)),
      transport(schedule, plan.topology, comms, wait_policy, compute.message_floats()),
      executor(schedule, program, plan.topology.worker, compute, transport) {}

Evaluator::Evaluator(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
                     const comm::Communicators& comms, comm::WaitPolicy wait_policy)
    : plan_(plan),
      worker_(worker),
      comms_(comms),
      wait_policy_(wait_policy),
      compute_(worker, staging),
      caches_(worker),
      prefill_compute_(
          caches_, GenerationStageCompute::Kind::Prefill, worker.backend(), staging.path(),
          static_cast<std::size_t>(worker.dims().T) * static_cast<std::size_t>(worker.dims().C)),
      append_compute_(caches_, GenerationStageCompute::Kind::Append, worker.backend(),
                      staging.path(), static_cast<std::size_t>(worker.dims().C)),
      batches_(plan.schedule, plan.topology.worker) {
  if (!batches_.any()) return;
  CHIMERA_REQUIRE(!plan.config.data.val.empty(),
                  "train.eval_every = {} needs a validation split: set data.val (HDF5 shards from "
                  "`chimera prep`)",
                  plan.config.train.eval_every);
  dataset_.emplace(data::TokenDataset::open(plan.config.data.val, plan.model.vocab_size));
  dataset_->require_samples(plan.stage_dims.B, plan.seq_len, "one validation micro-batch");
}

Evaluator::~Evaluator() = default;

// Made on first use, which every rank of the group reaches together: the transport's setup is
// collective, and a constructor that other ranks may never reach (one failed before) would hang.
Evaluator::Pass& Evaluator::pass(std::unique_ptr<Pass>& pass,
                                 schedule::Schedule (*make)(const schedule::Schedule&),
                                 StageCompute& compute) {
  if (!pass)
    pass = std::make_unique<Pass>(make(plan_.schedule), plan_, comms_, wait_policy_, compute);
  return *pass;
}

double Evaluator::evaluate() {
  Pass& validation = pass(validation_, &schedule::forward_only, compute_);
  const auto& topo = plan_.topology;
  double total[2] = {0.0, 0.0};  // loss sum, micro-batches
  for (int e = 0; e < plan_.config.train.eval_batches; ++e) {
    const MicroBatchInputs& inputs =
        dataset_ ? batches_.read(
                       *dataset_, plan_.seq_len, static_cast<std::size_t>(plan_.stage_dims.B),
                       [&](int m) {
                         return data::validation_micro_batch(dataset_->num_samples(plan_.seq_len),
                                                             plan_.batch, e, topo.replica, m);
                       })
                 : batches_.inputs();
    const IterationResult r = validation.executor.run(e, inputs, 1.0F, nullptr, 0.0);
    total[0] += r.loss_sum;
    total[1] += r.loss_count;
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, total, 2, MPI_DOUBLE, MPI_SUM, comms_.world()));
  return total[1] > 0 ? total[0] / total[1] : 0.0;
}

std::vector<std::int32_t> Evaluator::sample(std::span<const std::int32_t> prompt, int count,
                                            model::TokenSampler& sampler) {
  if (plan_.topology.replica != 0) return {};
  // One worker holding the whole model generates with its key/value cache in one piece (the same
  // tokens as the stages' caches below).
  if (worker_.layout().partition().num_stages() == 1) {
    return model::generate(worker_, prompt, count, sampler);
  }
  Pass& prefill = pass(prefill_, &schedule::forward_one, prefill_compute_);
  Pass& append = pass(append_, &schedule::forward_one, append_compute_);
  const int last_worker = prefill.schedule.placement.front().back();
  const model::Dims& dims = worker_.dims();
  const int capacity = static_cast<int>(dims.T);
  // The passes' micro-batch inputs: stage 0 reads the caches' window or token instead.
  const std::vector<std::int32_t> padding(static_cast<std::size_t>(dims.N()), 0);
  const MicroBatchInputs inputs{{padding.data()}, {padding.data()}};
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end()), generated;
  std::int32_t token = 0;
  caches_.begin(capacity);
  caches_.at_last = [&](std::span<const float> logits) { token = sampler.next(logits); };
  int positions = 0, run = 0;
  // Every rank of the group runs the same passes, so each knows the caches' fill.
  const auto next_token = [&] {
    if (positions == 0 || positions == capacity) {
      caches_.window = model::context_window(sequence, capacity);
      positions = static_cast<int>(caches_.window.size());
      prefill.executor.run(run++, inputs, 1.0F, nullptr, 0.0);
    } else {
      caches_.token = sequence.back();
      ++positions;
      append.executor.run(run++, inputs, 1.0F, nullptr, 0.0);
    }
    MPI_CHECK(MPI_Bcast(&token, 1, MPI_INT32_T, last_worker, comms_.pipeline()));
    return token;
  };
  for (int i = 0; i < count; ++i) {
    sequence.push_back(next_token());
    generated.push_back(sequence.back());
  }
  caches_.at_last = {};
  caches_.end();
  return generated;
}

}  // namespace chimera::runtime
