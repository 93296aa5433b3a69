// The ranks of one host and the cores they share, as the trainer reports them.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <thread>

#include "chimera/comm/core_sharing.hpp"

namespace chimera::comm {
namespace {

TEST(CoreSharing, EveryRankOfThisHostIsOnTheNode) {
  // The ranks of this host: all of them on one machine, one or a few on emulated hosts.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int size = 0;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  const CoreSharing s = core_sharing(MPI_COMM_WORLD);
  EXPECT_EQ(s.ranks_on_node, size);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_GE(s.cores, CPU_COUNT(&mine));
  EXPECT_LE(s.cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(s.oversubscribed(), size > s.cores);
}

}  // namespace
}  // namespace chimera::comm
