#pragma once
// The token batches one worker reads for one run of a schedule, training or evaluation: inputs
// for the schedule micro-batches whose pipe starts on it (stage 0), targets for those whose pipe
// ends on it, and the executor's pointers to them. A schedule micro-batch j is configured
// micro-batch j / mb_split, part j % mb_split of it.
#include <cstdint>
#include <functional>
#include <vector>

#include "chimera/data/dataset.hpp"
#include "chimera/schedule/ir.hpp"
#include "executor.hpp"

namespace chimera::runtime {

class ScheduleBatches {
 public:
  ScheduleBatches(const schedule::Schedule& schedule, int worker);

  // Whether this worker reads any tokens.
  bool any() const { return !needed_.empty(); }
  // The pointers of the last read(); all null before the first (workers that read nothing, or
  // emulated stages).
  const MicroBatchInputs& inputs() const { return inputs_; }

  // Reads every needed schedule micro-batch: `samples_of(m)` gives configured micro-batch m's
  // samples, of which the micro-batch takes its part of `part_size` samples.
  const MicroBatchInputs& read(const data::TokenDataset& dataset, int seq_len,
                               std::size_t part_size,
                               const std::function<std::vector<std::int64_t>(int)>& samples_of);

 private:
  int mb_split_;
  std::vector<int> needed_;                // schedule micro-batches this worker reads
  std::vector<data::TokenBatch> batches_;  // [schedule micro-batch]
  MicroBatchInputs inputs_;
};

}  // namespace chimera::runtime
