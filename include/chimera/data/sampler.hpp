#pragma once
// Which samples each micro-batch trains on: pure functions, so that every rank that needs a
// micro-batch (the ranks holding the first stage, for inputs, and the last stage, for targets,
// of its pipe) computes the same indices without communicating.
//
// Training reads an endless stream of sample positions; position p belongs to epoch p / S (S =
// samples in the split) and maps to sample shuffle(epoch, p % S), a seeded permutation of
// [0, S) drawn anew for every epoch. So every sample is used exactly once per epoch. A global
// batch is W*N*B consecutive positions; micro-batch m of replica w takes positions
// start + (w*N + m)*B + [0, B). Nothing depends on D or on the pipeline scheme: a one-process
// run with the same global batch W*N*B trains on the same samples (the runtime maps its schedule
// micro-batches, halving's halves included, onto (w, m)).
#include <cstdint>
#include <vector>

namespace chimera::data {

// W replicas x N micro-batches per pipeline group x B samples per micro-batch.
struct BatchLayout {
  int replicas = 1;          // W
  int micro_batches = 1;     // N
  int micro_batch_size = 1;  // B
  std::int64_t global_batch() const;
};

// A seeded permutation of [0, num_samples) per epoch, in O(1) memory (a keyed Feistel network
// on the next power of four, cycle-walked into range).
class EpochShuffle {
 public:
  EpochShuffle(std::int64_t num_samples, std::uint64_t seed);
  std::int64_t num_samples() const { return num_samples_; }
  // The sample at stream position `position` (>= 0).
  std::int64_t sample_at(std::int64_t position) const;
  // The permutation of one epoch: index -> sample.
  std::int64_t permute(std::int64_t epoch, std::int64_t index) const;

 private:
  std::int64_t num_samples_;
  std::uint64_t seed_;
  int half_bits_;  // the Feistel domain is 2^(2*half_bits) >= num_samples
};

// Stream position of the first sample of training step `step` when every step has used
// layout.global_batch() samples (the data cursor stored in checkpoints is this position).
std::int64_t batch_start(std::int64_t step, const BatchLayout& layout);

// The B samples of micro-batch `micro_batch` (in [0, N)) of replica `replica` (in [0, W)) of the
// global batch that starts at stream position `start`.
std::vector<std::int64_t> train_micro_batch(const EpochShuffle& shuffle, const BatchLayout& layout,
                                            std::int64_t start, int replica, int micro_batch);

// Validation: global batch `eval_batch` (0, 1, ... within one evaluation) of the val split, in
// order and without shuffling, wrapping around; the same samples at every evaluation, so losses
// of different steps compare.
std::vector<std::int64_t> validation_micro_batch(std::int64_t num_samples,
                                                 const BatchLayout& layout, int eval_batch,
                                                 int replica, int micro_batch);

}  // namespace chimera::data
