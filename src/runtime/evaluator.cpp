#include "chimera/runtime/evaluator.hpp"

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
  if (place.front() != me && place.back() != me) return;
  CHIMERA_REQUIRE(!plan.config.data.val.empty(),
                  "train.eval_every = {} needs a validation split: set data.val (HDF5 shards from "
                  "`chimera prep`)",
                  plan.config.train.eval_every);
  dataset_.emplace(data::TokenDataset::open(plan.config.data.val));
  dataset_->require_samples(plan.schedule_mb_size, plan.seq_len, "one validation micro-batch");
}

double Evaluator::evaluate() {
  const auto& sched = plan_.schedule;
  const auto& topo = plan_.topology;
  const auto& place = sched.placement.front();
  const int last = sched.stages - 1;
  const int split = sched.mb_split;
  const auto half = static_cast<std::size_t>(plan_.schedule_mb_size);
  const data::BatchLayout layout{topo.replicas, plan_.config.parallel.micro_batches,
                                 plan_.micro_batch_size};
  std::vector<int> mine;  // stages of the first pipe on this worker, in order
  for (int s = 0; s < sched.stages; ++s) {
    if (place[static_cast<std::size_t>(s)] == topo.worker) mine.push_back(s);
  }
  const auto floats = worker_.message_floats();
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
        for (const int s : mine) {
          model::ForwardInput input;
          if (s == 0) input.tokens = batch.inputs;
          if (s == last) input.targets = batch.targets;
          if (s > 0) {
            const int src = place[static_cast<std::size_t>(s - 1)];
            if (src == topo.worker) {
              in.swap(out);  // the previous stage ran here: its output is our input
            } else {
              MPI_Request r = MPI_REQUEST_NULL;
              MPI_CHECK(MPI_Irecv(in.data(), static_cast<int>(floats), MPI_FLOAT, src, s,
                                  comms_.pipeline(), &r));
              comm::wait(r, wait_policy_, nullptr, nullptr, nullptr, [&] {
                return fmt::format("recv of the validation activation of stage {} from rank {}",
                                   s - 1, topo.world_rank(topo.replica, src));
              });
            }
            input.activation = staging_.incoming(in.data());
          }
          float* const output = s == last ? nullptr : out.data();
          const float loss = worker_.forward(s, slot, input, staging_.outgoing(output));
          staging_.finish(output);
          worker_.release(s, slot);
          if (s == last) {
            loss_sum += loss;
          } else if (const int dst = place[static_cast<std::size_t>(s + 1)]; dst != topo.worker) {
            // Completing each send before the next item keeps one buffer; it cannot deadlock,
            // since the receiver's earlier items never wait on this worker's later ones.
            MPI_Request r = MPI_REQUEST_NULL;
            MPI_CHECK(MPI_Isend(out.data(), static_cast<int>(floats), MPI_FLOAT, dst, s + 1,
                                comms_.pipeline(), &r));
            comm::wait(r, wait_policy_, nullptr, nullptr, nullptr, [&] {
              return fmt::format("send of the validation activation of stage {} to rank {}", s,
                                 topo.world_rank(topo.replica, dst));
            });
          }
        }
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

}  // namespace chimera::runtime
