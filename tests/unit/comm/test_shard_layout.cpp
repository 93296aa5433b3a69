// The sharded optimizer's shards: contiguous, in holder order, covering the buffer once, with
// equal blocks but for the last ones (short or empty), as the MPI v-collectives take them.
#include <gtest/gtest.h>

#include <numeric>

#include "chimera/comm/sharded_sum.hpp"

namespace chimera::comm {
namespace {

TEST(ShardLayout, ShardsCoverTheBufferOnceInHolderOrder) {
  for (const std::size_t count : {0UL, 1UL, 7UL, 8UL, 1000UL, 1001UL}) {
    for (const int parts : {1, 2, 3, 4, 8}) {
      std::size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const ShardLayout s(count, parts, i);
        EXPECT_EQ(s.begin(), next) << count << " " << parts << " " << i;
        EXPECT_LE(s.size(), (count + parts - 1) / parts);
        next = s.end();
        const auto counts = s.counts();
        const auto displs = s.displacements();
        ASSERT_EQ(counts.size(), static_cast<std::size_t>(parts));
        EXPECT_EQ(static_cast<std::size_t>(counts[i]), s.size());
        EXPECT_EQ(static_cast<std::size_t>(displs[i]), s.begin());
        EXPECT_EQ(static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), 0)),
                  count);
      }
      EXPECT_EQ(next, count) << count << " " << parts;
    }
  }
}

TEST(ShardLayout, TheLastShardsTakeWhatIsLeft) {
  // 10 floats over 4 holders: blocks of 3, the last one short.
  EXPECT_EQ(ShardLayout(10, 4, 0).size(), 3U);
  EXPECT_EQ(ShardLayout(10, 4, 3).begin(), 9U);
  EXPECT_EQ(ShardLayout(10, 4, 3).size(), 1U);
  // 5 floats over 4 holders: blocks of 2, the last holder has none.
  EXPECT_EQ(ShardLayout(5, 4, 2).size(), 1U);
  EXPECT_EQ(ShardLayout(5, 4, 3).size(), 0U);
}

}  // namespace
}  // namespace chimera::comm
