#include <gtest/gtest.h>
#include <mpi.h>

#include "chimera/comm/agreement.hpp"

namespace chimera::comm {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

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

TEST(AllOrNone, InternalErrorsKeepStatusOne) {
  int status = 0;
  try {
    all_or_none(MPI_COMM_WORLD, [] { throw std::runtime_error("boom"); });
  } catch (const AgreedError& e) {
    status = e.status();
  }
  EXPECT_EQ(status, 1);
}

TEST(ConfigCheck, DetectsADifferentConfigurationOnAnyRank) {
  EXPECT_NO_THROW(check_same_config(MPI_COMM_WORLD, 42));
  if (world_size() == 1) return;
  int status = 0;
  try {
    check_same_config(MPI_COMM_WORLD, world_rank() == 1 ? 43 : 42);
  } catch (const AgreedError& e) {
    status = e.status();
    EXPECT_NE(std::string(e.what()).find("configuration differs across ranks"), std::string::npos);
  }
  EXPECT_EQ(status, 2);
}

}  // namespace
}  // namespace chimera::comm
