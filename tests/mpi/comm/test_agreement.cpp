#include <gtest/gtest.h>
#include <mpi.h>

#include "chimera/comm/agreement.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

using chimera::testing::world_rank;
using chimera::testing::world_size;

TEST(AllOrNone, SucceedsWhenEveryRankSucceeds) {
  EXPECT_NO_THROW(all_or_none(MPI_COMM_WORLD, [] {}));
}

// The last rank fails alone (a file missing on its node, say): every rank must leave with the
// same message and status, none may be left in a collective.
TEST(AllOrNone, EveryRankLearnsTheFirstFailure) {
  const int last = world_size() - 1;
  int status = 0, failed = -1;
  std::string message;
  try {
    all_or_none(MPI_COMM_WORLD, [&] {
      CHIMERA_REQUIRE(world_rank() != last, "dataset 'x.h5' not found on rank {}", world_rank());
    });
  } catch (const AgreedError& e) {
    status = e.status();
    failed = e.failed_rank();
    message = e.what();
  }
  EXPECT_EQ(status, 2);
  EXPECT_EQ(failed, last);
  EXPECT_EQ(message, "dataset 'x.h5' not found on rank " + std::to_string(last));
}

// The watched agreement (a checkpoint's phases) agrees the same way, its wait labelled.
TEST(AllOrNone, AWatchedAgreementLearnsTheFirstFailureToo) {
  const int last = world_size() - 1;
  const WaitPolicy policy;
  int failed = -1;
  std::string message;
  EXPECT_NO_THROW(all_or_none(
      MPI_COMM_WORLD, [] {}, policy, [] { return "the agreement"; }));
  try {
    all_or_none(
        MPI_COMM_WORLD,
        [&] { CHIMERA_REQUIRE(world_rank() != last, "no space on rank {}", world_rank()); }, policy,
        [] { return "the agreement"; });
  } catch (const AgreedError& e) {
    failed = e.failed_rank();
    message = e.what();
  }
  EXPECT_EQ(failed, last);
  EXPECT_EQ(message, "no space on rank " + std::to_string(last));
}

TEST(AllOrNone, InternalErrorsKeepStatusOne) {
  int status = 0;
  try {
    all_or_none(MPI_COMM_WORLD, [] { throw std::runtime_error("boom"); });
  } catch (const AgreedError& e) {
    status = e.status();
  }
  EXPECT_EQ(status, 1);
}

TEST(FirstDifference, NoneWhereEveryRankHoldsRankZerosValue) {
  EXPECT_FALSE(first_difference(MPI_COMM_WORLD, "bf16").has_value());
  EXPECT_FALSE(first_difference(MPI_COMM_WORLD, "").has_value());
}

// runtime.precision = auto on a job whose last node lacks bf16 units: every rank learns which
// rank differs and both values, of different lengths, so that all fall back together.
TEST(FirstDifference, EveryRankLearnsTheLowestDifferingRankAndBothValues) {
  const int last = world_size() - 1;
  const auto d = first_difference(MPI_COMM_WORLD, world_rank() == last ? "fp32" : "bf16-emulated");
  if (world_size() == 1) {
    EXPECT_FALSE(d.has_value());
    return;
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, last);
  EXPECT_EQ(d->root_value, "bf16-emulated");
  EXPECT_EQ(d->value, "fp32");
}

TEST(FirstDifference, TheLowestOfSeveralDifferingRanks) {
  if (world_size() < 3) GTEST_SKIP() << "needs 3 ranks, has " << world_size();
  const auto d =
      first_difference(MPI_COMM_WORLD, world_rank() == 0 ? "a" : std::to_string(world_rank()));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->root_value, "a");
  EXPECT_EQ(d->value, "1");
}

TEST(ConfigCheck, DetectsADifferentConfigurationOnAnyRank) {
  EXPECT_NO_THROW(check_same_config(MPI_COMM_WORLD, 42));
  if (world_size() == 1) return;
  int status = 0, failed = -1;
  try {
    check_same_config(MPI_COMM_WORLD, world_rank() == 1 ? 43 : 42);
  } catch (const AgreedError& e) {
    status = e.status();
    failed = e.failed_rank();
    EXPECT_NE(std::string(e.what()).find("configuration differs across ranks (hash "
                                         "000000000000002b on rank 1, 000000000000002a on rank 0)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(status, 2);
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace chimera::comm
