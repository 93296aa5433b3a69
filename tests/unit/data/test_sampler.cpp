// Sampler properties: per-epoch permutations, every sample once per epoch, agreement between the
// ranks that need a micro-batch, and independence from D and the scheme.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>

#include "chimera/data/sampler.hpp"

namespace chimera::data {
namespace {

TEST(EpochShuffle, IsAPermutationForEverySize) {
  for (const std::int64_t n : {1, 2, 3, 5, 16, 17, 100, 1000, 4097}) {
    const EpochShuffle shuffle(n, 1337);
    for (const std::int64_t epoch : {0, 1, 7}) {
      std::vector<bool> seen(static_cast<std::size_t>(n), false);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t s = shuffle.permute(epoch, i);
        ASSERT_GE(s, 0);
        ASSERT_LT(s, n);
        ASSERT_FALSE(seen[static_cast<std::size_t>(s)]) << "n=" << n << " sample " << s << " twice";
        seen[static_cast<std::size_t>(s)] = true;
      }
    }
  }
}

TEST(EpochShuffle, DependsOnSeedAndEpochOnly) {
  const EpochShuffle a(1000, 1), a_again(1000, 1), b(1000, 2);
  int differs_by_seed = 0, differs_by_epoch = 0, fixed_points = 0;
  for (std::int64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.permute(3, i), a_again.permute(3, i));
    differs_by_seed += a.permute(0, i) != b.permute(0, i);
    differs_by_epoch += a.permute(0, i) != a.permute(1, i);
    fixed_points += a.permute(0, i) == i;
  }
  EXPECT_GT(differs_by_seed, 900);
  EXPECT_GT(differs_by_epoch, 900);
  EXPECT_LT(fixed_points, 20);  // a shuffle, not the identity
  EXPECT_EQ(a.sample_at(1000 + 5), a.permute(1, 5));
}

// The ranks of a Chimera group (W replicas x D workers) that need micro-batch m: the holders of
// stage 0 (inputs) and stage D-1 (targets) of its pipe. Pipe 0 (down) takes the first half of
// the micro-batches and has stage s on worker s; pipe 1 (up) has stage s on worker D-1-s.
std::pair<int, int> workers_needing(int D, int N, int m) {
  const bool down = m < N / 2;
  return down ? std::pair{0, D - 1} : std::pair{D - 1, 0};
}

struct Layout {
  int W, D, N;
};

class SamplerLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(SamplerLayouts, EverySampleOncePerEpochSameOnEveryRankAndIndependentOfD) {
  const auto [W, D, N] = GetParam();
  const int B = 3;
  const BatchLayout layout{W, N, B};
  const std::int64_t G = layout.global_batch();
  const std::int64_t S = 5 * G + 7;  // epochs do not end on batch boundaries
  const EpochShuffle shuffle(S, 42);
  const BatchLayout single{1, W * N, B};  // one process, same global batch

  std::map<std::int64_t, int> uses_epoch0;
  const std::int64_t steps = (2 * S) / G + 1;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t start = batch_start(step, layout);
    std::multiset<std::int64_t> group_batch;
    for (int w = 0; w < W; ++w) {
      for (int m = 0; m < N; ++m) {
        // The input and the target rank of (w, m) compute it on their own (the function has no
        // rank input: that is the property under test); they must agree.
        const auto [input_worker, target_worker] = workers_needing(D, N, m);
        ASSERT_NE(input_worker, target_worker);
        const auto inputs = train_micro_batch(shuffle, layout, start, w, m);
        const auto targets = train_micro_batch(shuffle, layout, start, w, m);
        ASSERT_EQ(inputs, targets);
        ASSERT_EQ(inputs.size(), static_cast<std::size_t>(B));
        for (int b = 0; b < B; ++b) {
          const std::int64_t position = start + (w * N + m) * B + b;
          const std::int64_t sample = inputs[static_cast<std::size_t>(b)];
          if (position < S) ++uses_epoch0[sample];
          group_batch.insert(sample);
        }
      }
    }
    // A single process with N' = W*N micro-batches trains on the same samples.
    std::multiset<std::int64_t> single_batch;
    for (int m = 0; m < W * N; ++m)
      for (const std::int64_t s :
           train_micro_batch(shuffle, single, batch_start(step, single), 0, m))
        single_batch.insert(s);
    ASSERT_EQ(group_batch, single_batch) << "step " << step;
  }
  ASSERT_EQ(static_cast<std::int64_t>(uses_epoch0.size()), S);
  for (const auto& [sample, uses] : uses_epoch0) ASSERT_EQ(uses, 1) << "sample " << sample;
}

INSTANTIATE_TEST_SUITE_P(WDN, SamplerLayouts,
                         ::testing::Values(Layout{1, 2, 2}, Layout{1, 2, 8}, Layout{1, 4, 2},
                                           Layout{1, 4, 8}, Layout{2, 2, 2}, Layout{2, 2, 8},
                                           Layout{2, 4, 2}, Layout{2, 4, 8}, Layout{4, 2, 2},
                                           Layout{4, 2, 8}, Layout{4, 4, 2}, Layout{4, 4, 8}),
                         [](const auto& param_info) {
                           const Layout& l = param_info.param;
                           return fmt::format("W{}_D{}_N{}", l.W, l.D, l.N);
                         });

TEST(Sampler, MicroBatchesOfOneStepAreDisjointAndFollowTheStream) {
  const BatchLayout layout{2, 4, 2};
  const EpochShuffle shuffle(1000, 9);
  const auto first = train_micro_batch(shuffle, layout, batch_start(3, layout), 1, 2);
  const std::int64_t position = 3 * 16 + (1 * 4 + 2) * 2;
  EXPECT_EQ(first, (std::vector<std::int64_t>{shuffle.sample_at(position),
                                              shuffle.sample_at(position + 1)}));
}

TEST(Sampler, ValidationIsInOrderAndRepeatable) {
  const BatchLayout layout{2, 2, 3};  // G = 12
  EXPECT_EQ(validation_micro_batch(100, layout, 0, 0, 0), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(validation_micro_batch(100, layout, 0, 1, 1), (std::vector<std::int64_t>{9, 10, 11}));
  EXPECT_EQ(validation_micro_batch(100, layout, 8, 1, 1), (std::vector<std::int64_t>{5, 6, 7}));
  EXPECT_EQ(validation_micro_batch(100, layout, 2, 0, 1),
            validation_micro_batch(100, layout, 2, 0, 1));
}

}  // namespace
}  // namespace chimera::data
