#include "chimera/data/sampler.hpp"

#include "chimera/core/error.hpp"

namespace chimera::data {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

constexpr int kFeistelRounds = 6;

void check_layout(const BatchLayout& layout, int replica, int micro_batch) {
  CHIMERA_CHECK(layout.replicas > 0 && layout.micro_batches > 0 && layout.micro_batch_size > 0,
                "batch layout W={} N={} B={}", layout.replicas, layout.micro_batches,
                layout.micro_batch_size);
  CHIMERA_CHECK(replica >= 0 && replica < layout.replicas, "replica {} of W={}", replica,
                layout.replicas);
  CHIMERA_CHECK(micro_batch >= 0 && micro_batch < layout.micro_batches, "micro-batch {} of N={}",
                micro_batch, layout.micro_batches);
}

std::int64_t first_position(const BatchLayout& layout, std::int64_t start, int replica,
                            int micro_batch) {
  return start + (static_cast<std::int64_t>(replica) * layout.micro_batches + micro_batch) *
                     layout.micro_batch_size;
}

}  // namespace

std::int64_t BatchLayout::global_batch() const {
  return static_cast<std::int64_t>(replicas) * micro_batches * micro_batch_size;
}

EpochShuffle::EpochShuffle(std::int64_t num_samples, std::uint64_t seed)
    : num_samples_(num_samples), seed_(seed), half_bits_(1) {
  CHIMERA_REQUIRE(num_samples > 0, "cannot shuffle an empty split (0 samples)");
  while ((std::int64_t{1} << (2 * half_bits_)) < num_samples) ++half_bits_;
}

std::int64_t EpochShuffle::permute(std::int64_t epoch, std::int64_t index) const {
  CHIMERA_CHECK(index >= 0 && index < num_samples_, "index {} of {}", index, num_samples_);
  const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
  const std::uint64_t key = splitmix64(seed_ ^ splitmix64(static_cast<std::uint64_t>(epoch)));
  auto x = static_cast<std::uint64_t>(index);
  // A Feistel network is a bijection of [0, 4^half_bits); applying it until the value falls in
  // [0, num_samples) (cycle walking) restricts it to a bijection of that range. The domain is
  // less than 4x the range, so few steps are needed on average.
  do {
    std::uint64_t left = x >> half_bits_, right = x & mask;
    for (int round = 0; round < kFeistelRounds; ++round) {
      const std::uint64_t f =
          splitmix64(key + static_cast<std::uint64_t>(round) * 0x632BE59BD9B4E019ULL + right) &
          mask;
      const std::uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<std::uint64_t>(num_samples_));
  return static_cast<std::int64_t>(x);
}

std::int64_t EpochShuffle::sample_at(std::int64_t position) const {
  CHIMERA_CHECK(position >= 0, "negative stream position {}", position);
  return permute(position / num_samples_, position % num_samples_);
}

std::int64_t batch_start(std::int64_t step, const BatchLayout& layout) {
  CHIMERA_CHECK(step >= 0, "negative step {}", step);
  return step * layout.global_batch();
}

std::vector<std::int64_t> train_micro_batch(const EpochShuffle& shuffle, const BatchLayout& layout,
                                            std::int64_t start, int replica, int micro_batch) {
  check_layout(layout, replica, micro_batch);
  const std::int64_t first = first_position(layout, start, replica, micro_batch);
  std::vector<std::int64_t> samples(static_cast<std::size_t>(layout.micro_batch_size));
  for (std::size_t b = 0; b < samples.size(); ++b)
    samples[b] = shuffle.sample_at(first + static_cast<std::int64_t>(b));
  return samples;
}

std::vector<std::int64_t> validation_micro_batch(std::int64_t num_samples,
                                                 const BatchLayout& layout, int eval_batch,
                                                 int replica, int micro_batch) {
  check_layout(layout, replica, micro_batch);
  CHIMERA_REQUIRE(num_samples > 0, "the validation split has no samples");
  CHIMERA_CHECK(eval_batch >= 0, "negative eval batch {}", eval_batch);
  const std::int64_t first =
      first_position(layout, eval_batch * layout.global_batch(), replica, micro_batch);
  std::vector<std::int64_t> samples(static_cast<std::size_t>(layout.micro_batch_size));
  for (std::size_t b = 0; b < samples.size(); ++b)
    samples[b] = (first + static_cast<std::int64_t>(b)) % num_samples;
  return samples;
}

}  // namespace chimera::data
