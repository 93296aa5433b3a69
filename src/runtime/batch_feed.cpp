#include "batch_feed.hpp"

#include <fmt/format.h>

#include <utility>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

BatchFeed::BatchFeed(const RunPlan& plan)
    : plan_(plan),
      layout_(plan.batch),
      batches_(plan.schedule, plan.topology.worker),
      prefetched_(plan.schedule, plan.topology.worker) {
  if (plan.emulate || !batches_.any()) return;
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

BatchFeed::~BatchFeed() {
  join();
}

const MicroBatchInputs& BatchFeed::read(ScheduleBatches& into, std::int64_t cursor) {
  return into.read(
      *dataset_, plan_.seq_len, static_cast<std::size_t>(plan_.stage_dims.B), [&](int m) {
        return data::train_micro_batch(*shuffle_, layout_, cursor, plan_.topology.replica, m);
      });
}

const MicroBatchInputs& BatchFeed::load(std::int64_t cursor) {
  const Stopwatch clock;
  const MicroBatchInputs& inputs = take(cursor);
  waited_s_ += clock.seconds();
  return inputs;
}

const MicroBatchInputs& BatchFeed::take(std::int64_t cursor) {
  if (!dataset_) return batches_.inputs();  // emulated stages read no tokens
  join();
  if (prefetched_cursor_ == cursor) {
    prefetched_cursor_.reset();
    if (prefetch_error_) std::rethrow_exception(std::exchange(prefetch_error_, nullptr));
    std::swap(batches_, prefetched_);
    return batches_.inputs();
  }
  prefetched_cursor_.reset();
  prefetch_error_ = nullptr;
  return read(batches_, cursor);
}

void BatchFeed::prefetch(std::int64_t cursor) {
  if (!dataset_ || !plan_.config.data.prefetch) return;  // load() reads it when it is needed
  join();
  prefetched_cursor_ = cursor;
  prefetch_error_ = nullptr;
  reader_ = std::thread([this, cursor] {
    try {
      read(prefetched_, cursor);
    } catch (...) {
      prefetch_error_ = std::current_exception();
    }
  });
}

void BatchFeed::wait() {
  const Stopwatch clock;
  join();
  waited_s_ += clock.seconds();
}

void BatchFeed::join() {
  if (reader_.joinable()) reader_.join();
}

}  // namespace chimera::runtime
