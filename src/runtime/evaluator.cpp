#include "evaluator.hpp"

#include <fmt/format.h>

#include "chimera/data/sampler.hpp"

namespace chimera::runtime {

namespace {
// Slot ids for evaluation micro-batches: far above any schedule micro-batch id.
constexpr int kEvalSlotBase = 1 << 24;
}  // namespace

Evaluator::Evaluator(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
                     const comm::Communicators& comms, comm::WaitPolicy wait_policy)
    : plan_(plan), worker_(worker), staging_(staging), comms_(comms), wait_policy_(wait_policy) {
  const auto& place = plan.schedule.placement.front();
  const int me = plan.topology.worker;
  for (int s = 0; s < plan.schedule.stages; ++s) {
    if (place[static_cast<std::size_t>(s)] == me) mine_.push_back(s);
  }
  if (place.front() != me && place.back() != me) return;
  CHIMERA_REQUIRE(!plan.config.data.val.empty(),
                  "train.eval_every = {} needs a validation split: set data.val (HDF5 shards from "
                  "`chimera prep`)",
                  plan.config.train.eval_every);
  dataset_.emplace(data::TokenDataset::open(plan.config.data.val, plan.model.vocab_size));
  dataset_->require_samples(plan.schedule_mb_size, plan.seq_len, "one validation micro-batch");
}

float Evaluator::forward_through_pipe(std::span<const std::int32_t> inputs,
                                      std::span<const std::int32_t> targets, int slot,
                                      MessageBuffer& in, MessageBuffer& out,
                                      const std::function<void(int)>& at_last) {
  const auto& place = plan_.schedule.placement.front();
  const int me = plan_.topology.worker;
  const int last = plan_.schedule.stages - 1;
  const auto floats = worker_.message_floats();
  float loss = 0.0F;
  for (const int s : mine_) {
    model::ForwardInput input;
    if (s == 0) input.tokens = inputs;
    if (s == last) input.targets = targets;
    if (s > 0) {
      const int src = place[static_cast<std::size_t>(s - 1)];
      if (src == me) {
        in.swap(out);  // the previous stage ran here: its output is our input
      } else {
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_CHECK(MPI_Irecv(in.data(), static_cast<int>(floats), MPI_FLOAT, src, s,
                            comms_.pipeline(), &r));
        comm::wait(r, wait_policy_, nullptr, nullptr, nullptr, [&] {
          return fmt::format("recv of the validation activation of stage {} from rank {}", s - 1,
                             plan_.topology.world_rank(plan_.topology.replica, src));
        });
      }
      input.activation = staging_.incoming(in.data());
    }
    float* const output = s == last ? nullptr : out.data();
    const float stage_loss = worker_.forward(s, slot, input, staging_.outgoing(output));
    staging_.finish(output);
    if (s == last && at_last) at_last(slot);
    worker_.release(s, slot);
    if (s == last) {
      loss = stage_loss;
    } else if (const int dst = place[static_cast<std::size_t>(s + 1)]; dst != me) {
      // Completing each send before the next item keeps one buffer; it cannot deadlock, since
      // the receiver's earlier items never wait on this worker's later ones.
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Isend(out.data(), static_cast<int>(floats), MPI_FLOAT, dst, s + 1,
                          comms_.pipeline(), &r));
      comm::wait(r, wait_policy_, nullptr, nullptr, nullptr, [&] {
        return fmt::format("send of the validation activation of stage {} to rank {}", s,
                           plan_.topology.world_rank(plan_.topology.replica, dst));
      });
    }
  }
  return loss;
}

double Evaluator::evaluate() {
  const auto& sched = plan_.schedule;
  const auto& topo = plan_.topology;
  const auto& place = sched.placement.front();
  const int split = sched.mb_split;
  const auto half = static_cast<std::size_t>(plan_.schedule_mb_size);
  const data::BatchLayout layout{topo.replicas, plan_.config.parallel.micro_batches,
                                 plan_.micro_batch_size};
  MessageBuffer in(staging_), out(staging_);
  double loss_sum = 0.0;
  int slot = kEvalSlotBase;
  for (int e = 0; e < plan_.config.train.eval_batches; ++e) {
    for (int m = 0; m < layout.micro_batches; ++m) {
      data::TokenBatch batch;
      for (int h = 0; h < split; ++h, ++slot) {
        if (dataset_) {
          const auto all = data::validation_micro_batch(dataset_->num_samples(plan_.seq_len),
                                                        layout, e, topo.replica, m);
          const auto begin = all.begin() + static_cast<std::ptrdiff_t>(h * half);
          batch = data::read_batch(*dataset_, {begin, begin + static_cast<std::ptrdiff_t>(half)},
                                   plan_.seq_len);
        }
        loss_sum += forward_through_pipe(batch.inputs, batch.targets, slot, in, out);
      }
    }
  }
  double total[2] = {loss_sum,
                     place.back() == topo.worker
                         ? double(plan_.config.train.eval_batches) * layout.micro_batches * split
                         : 0.0};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, total, 2, MPI_DOUBLE, MPI_SUM, comms_.world()));
  return total[1] > 0 ? total[0] / total[1] : 0.0;
}

std::vector<std::int32_t> Evaluator::sample(std::span<const std::int32_t> prompt, int count,
                                            model::TokenSampler& sampler) {
  if (plan_.topology.replica != 0) return {};
  const int last_worker = plan_.schedule.placement.front().back();
  const model::Dims& dims = worker_.dims();
  const auto T = static_cast<std::size_t>(dims.T);
  const auto V = static_cast<std::size_t>(dims.V);
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  // Row 0 of the micro-batch carries the window; the other rows and the targets are padding.
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(dims.N()), 0);
  const std::vector<std::int32_t> targets(inputs.size(), 0);
  std::vector<float> logits(V);
  MessageBuffer in(staging_), out(staging_);
  std::vector<std::int32_t> generated;
  for (int i = 0; i < count; ++i) {
    const auto window = model::context_window(sequence, dims.T);
    std::fill(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(T), 0);
    std::copy(window.begin(), window.end(), inputs.begin());
    std::int32_t token = 0;
    forward_through_pipe(inputs, targets, kEvalSlotBase, in, out, [&](int slot) {
      worker_.logits(slot, logits, static_cast<model::Index>(window.size() - 1));
      token = sampler.next(logits);
    });
    MPI_CHECK(MPI_Bcast(&token, 1, MPI_INT32_T, last_worker, comms_.pipeline()));
    sequence.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace chimera::runtime
