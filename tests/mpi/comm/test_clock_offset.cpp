// offset_to_rank0 (comm/clock_offset.hpp): every rank's clock here runs 1000 s per rank ahead of
// rank 0's, as the steady clocks of different nodes do, and each rank must find its own offset to
// within its round trips (a bound of 50 ms, far above a round trip on one machine).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "chimera/comm/clock_offset.hpp"
#include "chimera/core/timer.hpp"
#include "mpi_world.hpp"

namespace chimera::comm {
namespace {

using chimera::testing::world_rank;

double skew_s = 0.0;
double skewed_clock() {
  return now_seconds() + skew_s;
}

TEST(ClockOffset, EachRankFindsHowFarRankZerosClockIsFromItsOwn) {
  skew_s = 1000.0 * world_rank();
  const double offset = offset_to_rank0(MPI_COMM_WORLD, skewed_clock);
  EXPECT_LT(std::abs(offset + skew_s), 0.050) << "rank " << world_rank() << ": " << offset;
  skew_s = 0.0;
}

TEST(ClockOffset, RanksOnOneClockFindNoOffset) {
  const double offset = offset_to_rank0(MPI_COMM_WORLD);
  EXPECT_LT(std::abs(offset), 0.050) << "rank " << world_rank() << ": " << offset;
}

}  // namespace
}  // namespace chimera::comm
