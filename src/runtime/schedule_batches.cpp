#include "schedule_batches.hpp"

namespace chimera::runtime {

ScheduleBatches::ScheduleBatches(const schedule::Schedule& schedule, int worker)
    : mb_split_(schedule.mb_split) {
  const auto m = static_cast<std::size_t>(schedule.schedule_micro_batches);
  inputs_.tokens.assign(m, nullptr);
  inputs_.targets.assign(m, nullptr);
  batches_.resize(m);
  for (int j = 0; j < schedule.schedule_micro_batches; ++j) {
    const auto& place = schedule.placement.at(static_cast<std::size_t>(schedule.pipe_of[j]));
    if (place.front() == worker || place.back() == worker) needed_.push_back(j);
  }
}

const MicroBatchInputs& ScheduleBatches::read(
    const data::TokenDataset& dataset, int seq_len, std::size_t part_size,
    const std::function<std::vector<std::int64_t>(int)>& samples_of) {
  const auto part = static_cast<std::ptrdiff_t>(part_size);
  for (const int j : needed_) {
    const std::vector<std::int64_t> all = samples_of(j / mb_split_);
    const auto begin = all.begin() + (j % mb_split_) * part;
    auto& b = batches_[static_cast<std::size_t>(j)];
    b = data::read_batch(dataset, {begin, begin + part}, seq_len);
    inputs_.tokens[static_cast<std::size_t>(j)] = b.inputs.data();
    inputs_.targets[static_cast<std::size_t>(j)] = b.targets.data();
  }
  return inputs_;
}

}  // namespace chimera::runtime
