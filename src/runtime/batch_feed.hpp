#pragma once
// Reads, for each training step, the token batches this worker needs: inputs for the schedule
// micro-batches whose pipe starts on it (stage 0), targets for those whose pipe ends on it. The
// sampler is a pure function of the data cursor, so no rank communicates to agree on samples.
// A schedule micro-batch j is configured micro-batch j / mb_split, half j % mb_split of it.
#include <cstdint>
#include <optional>
#include <vector>

#include "chimera/data/dataset.hpp"
#include "chimera/data/sampler.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "executor.hpp"

namespace chimera::runtime {

class BatchFeed {
 public:
  // Opens the training split only if this worker needs data; InputError on a bad dataset.
  explicit BatchFeed(const RunPlan& plan);

  bool needs_data() const { return !needed_.empty(); }
  // Reads the batches of the global batch starting at stream position `cursor`.
  const MicroBatchInputs& load(std::int64_t cursor);

  data::BatchLayout layout() const { return layout_; }

 private:
  const RunPlan& plan_;
  data::BatchLayout layout_;
  std::vector<int> needed_;  // schedule micro-batches this worker reads
  std::optional<data::TokenDataset> dataset_;
  std::optional<data::EpochShuffle> shuffle_;
  std::vector<data::TokenBatch> batches_;  // [schedule micro-batch]
  MicroBatchInputs inputs_;
};

}  // namespace chimera::runtime
