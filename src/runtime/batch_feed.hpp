#pragma once
// Reads, for each training step, the token batches this worker needs (schedule_batches.hpp). The
// sampler is a pure function of the data cursor, so no rank communicates to agree on samples.
//
// The next step's batches are read while this step computes (data.prefetch, default true):
// prefetch() hands the read to a helper thread, wait() takes it back. The thread reads through
// HDF5, which Debian builds without thread safety; that is sound because the two never overlap in
// the library: between prefetch() and wait() the main thread runs only the executor (compute and
// MPI, no HDF5), and wait() joins the thread before anything else (validation, a checkpoint save)
// may call HDF5.
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

#include "chimera/data/dataset.hpp"
#include "chimera/data/sampler.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "executor.hpp"
#include "schedule_batches.hpp"

namespace chimera::runtime {

class BatchFeed {
 public:
  // Opens the training split only if this worker needs data; InputError on a bad dataset.
  explicit BatchFeed(const RunPlan& plan);

  bool needs_data() const { return dataset_.has_value(); }
  // The batches of the global batch starting at stream position `cursor` (no pointers set where
  // the worker reads nothing, or the stages are emulated): the prefetched ones when they are of
  // this cursor, else read now.
  const MicroBatchInputs& load(std::int64_t cursor);
  // Starts reading the batches of `cursor` on the helper thread (nothing with data.prefetch =
  // false). Until wait(), the caller makes no HDF5 call and keeps using the batches of the last
  // load().
  void prefetch(std::int64_t cursor);
  // Waits for the read prefetch() started; its failure is thrown by the load() of its cursor.
  void wait();
  ~BatchFeed();

  data::BatchLayout layout() const { return layout_; }
  // How long the caller has waited for sample reads, in load() and wait() together: what the
  // reads have cost the training's path on this rank.
  double waited_seconds() const { return waited_s_; }

 private:
  const RunPlan& plan_;
  data::BatchLayout layout_;
  const MicroBatchInputs& read(ScheduleBatches& into, std::int64_t cursor);

  ScheduleBatches batches_;     // the batches the executor uses
  ScheduleBatches prefetched_;  // filled by the helper thread
  std::optional<std::int64_t> prefetched_cursor_;
  std::exception_ptr prefetch_error_;
  std::thread reader_;
  std::optional<data::TokenDataset> dataset_;
  std::optional<data::EpochShuffle> shuffle_;
  double waited_s_ = 0.0;
  const MicroBatchInputs& take(std::int64_t cursor);  // load() without its clock
  void join();
};

}  // namespace chimera::runtime
