#pragma once
// Reads, for each training step, the token batches this worker needs (schedule_batches.hpp). The
// sampler is a pure function of the data cursor, so no rank communicates to agree on samples.
#include <cstdint>
#include <optional>

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
  // Reads the batches of the global batch starting at stream position `cursor` (no pointers set
  // where the worker reads nothing, or the stages are emulated).
  const MicroBatchInputs& load(std::int64_t cursor);

  data::BatchLayout layout() const { return layout_; }

 private:
  const RunPlan& plan_;
  data::BatchLayout layout_;
  ScheduleBatches batches_;
  std::optional<data::TokenDataset> dataset_;
  std::optional<data::EpochShuffle> shuffle_;
};

}  // namespace chimera::runtime
