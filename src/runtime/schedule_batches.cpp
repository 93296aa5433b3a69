#include "schedule_batches.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

namespace chimera::runtime {

namespace {

// Test only: CHIMERA_TEST_READ_LATENCY_MS=20 makes each sample's read wait 20 ms more, as a
// parallel file system's latency would (the test of reads off the critical path). Real runs
// never set it.
std::chrono::microseconds injected_read_latency() {
  static const std::chrono::microseconds latency = [] {
    const char* text = std::getenv("CHIMERA_TEST_READ_LATENCY_MS");
    const double ms = text != nullptr ? std::strtod(text, nullptr) : 0.0;
    return std::chrono::microseconds(ms > 0 ? static_cast<std::int64_t>(ms * 1e3) : 0);
  }();
  return latency;
}

}  // namespace

ScheduleBatches::ScheduleBatches(const schedule::Schedule& schedule, int worker)
    : mb_split_(schedule.mb_split) {
  const auto m = static_cast<std::size_t>(schedule.micro_batches);
  inputs_.tokens.assign(m, nullptr);
  inputs_.targets.assign(m, nullptr);
  batches_.resize(m);
  for (int j = 0; j < schedule.micro_batches; ++j) {
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
    if (injected_read_latency().count() > 0)
      std::this_thread::sleep_for(injected_read_latency() * part);  // one read per sample
    b = data::read_batch(dataset, {begin, begin + part}, seq_len);
    inputs_.tokens[static_cast<std::size_t>(j)] = b.inputs.data();
    inputs_.targets[static_cast<std::size_t>(j)] = b.targets.data();
  }
  return inputs_;
}

}  // namespace chimera::runtime
