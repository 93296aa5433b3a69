// The sharded optimizer's sum on its own: the ring reduce-scatter leaves every rank's shard of
// the buffer holding the exact sum over the ranks (small integers: float sums are exact), at
// buffer sizes whose shards are unequal or empty and with messages cut into pieces; the in-place
// all-gather then gives every rank every rank's shard.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "chimera/comm/sharded_sum.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

float value(int rank, std::size_t i) {
  return static_cast<float>((rank * 7 + static_cast<int>(i) * 3) % 11);
}

TEST(ShardedSum, RingReduceScatterThenAllGatherGiveTheSumEverywhere) {
  const int rank = testing::world_rank(), size = testing::world_size();
  for (const std::size_t count : {1UL, 5UL, 10UL, 37UL, 1000UL}) {
    for (const std::size_t piece : {1UL, 3UL, ShardedSum::kPieceFloats}) {
      std::vector<float> grads(count), weights(count, -1.0F);
      for (std::size_t i = 0; i < count; ++i) grads[i] = value(rank, i);
      ShardedSum sum(GradBuffer{"test", 0, grads.data(), count}, MPI_COMM_WORLD, weights.data(),
                     piece);
      const ShardLayout& shard = sum.layout();
      for (int iteration = 0; iteration < 2; ++iteration) {  // a sum is reused every step
        for (std::size_t i = 0; i < count; ++i) grads[i] = value(rank, i);
        sum.start();
        sum.finish([&] { sum.test(); }, WaitPolicy{}, {});
        bool exact = true;
        for (std::size_t i = shard.begin(); i < shard.end(); ++i) {
          float want = 0.0F;
          for (int r = 0; r < size; ++r) want += value(r, i);
          exact = exact && grads[i] == want;
          weights[i] = want;  // the "optimizer step": this rank's shard of the weights
        }
        EXPECT_TRUE(exact) << "count " << count << " piece " << piece;
        sum.start_gather();
        sum.finish_gather([&] { sum.test_gather(); }, WaitPolicy{}, {});
        bool whole = true;
        for (std::size_t i = 0; i < count; ++i) {
          float want = 0.0F;
          for (int r = 0; r < size; ++r) want += value(r, i);
          whole = whole && weights[i] == want;
        }
        EXPECT_TRUE(whole) << "count " << count << " piece " << piece;
      }
    }
  }
}

}  // namespace
}  // namespace chimera::comm
