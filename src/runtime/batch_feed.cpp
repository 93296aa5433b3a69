#include "batch_feed.hpp"

#include <fmt/format.h>

#include "chimera/core/error.hpp"

namespace chimera::runtime {

BatchFeed::BatchFeed(const RunPlan& plan) : plan_(plan) {
  const auto& sched = plan.schedule;
  const auto& topo = plan.topology;
  layout_ =
      data::BatchLayout{topo.replicas, plan.config.parallel.micro_batches, plan.micro_batch_size};
  const auto m = static_cast<std::size_t>(sched.micro_batches);
  inputs_.tokens.assign(m, nullptr);
  inputs_.targets.assign(m, nullptr);
  batches_.resize(m);
  if (plan.emulate) return;  // emulated stages read no tokens
  for (int j = 0; j < sched.micro_batches; ++j) {
    const auto& place = sched.placement.at(static_cast<std::size_t>(sched.pipe_of[j]));
    if (place.front() == topo.worker || place.back() == topo.worker) needed_.push_back(j);
  }
  if (needed_.empty()) return;
  CHIMERA_REQUIRE(!plan.config.data.train.empty(),
                  "data.train is empty: name the training token shards (HDF5 from `chimera prep`), "
                  "e.g. --set data.train=data/austen/train.h5");
  // Every token read is checked against the model's vocabulary: a file declaring another
  // vocab_size trains as long as its tokens fit the model.
  dataset_.emplace(data::TokenDataset::open(plan.config.data.train, plan.model.vocab_size));
  dataset_->require_samples(layout_.global_batch(), plan.seq_len,
                            fmt::format("one global batch (W*N*B = {}*{}*{})", layout_.replicas,
                                        layout_.micro_batches, layout_.micro_batch_size));
  shuffle_.emplace(dataset_->num_samples(plan.seq_len),
                   static_cast<std::uint64_t>(plan.config.train.seed));
}

const MicroBatchInputs& BatchFeed::load(std::int64_t cursor) {
  const int split = plan_.schedule.mb_split;
  const auto half = static_cast<std::size_t>(plan_.schedule_mb_size);
  for (const int j : needed_) {
    const auto all =
        data::train_micro_batch(*shuffle_, layout_, cursor, plan_.topology.replica, j / split);
    const auto begin = all.begin() + static_cast<std::ptrdiff_t>((j % split) * half);
    const std::vector<std::int64_t> samples(begin, begin + static_cast<std::ptrdiff_t>(half));
    auto& b = batches_[static_cast<std::size_t>(j)];
    b = data::read_batch(*dataset_, samples, plan_.seq_len);
    inputs_.tokens[static_cast<std::size_t>(j)] = b.inputs.data();
    inputs_.targets[static_cast<std::size_t>(j)] = b.targets.data();
  }
  return inputs_;
}

}  // namespace chimera::runtime
