// Making device groups (NCCL communicators) over MPI, with fake groups: a rank whose id or join
// fails ends every rank with its message, and a rank that never finishes its join is ended by
// runtime.watchdog_s (device_group_setup.hpp). No GPU needed.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "chimera/comm/agreement.hpp"
#include "chimera/core/error.hpp"
#include "device_group_setup.hpp"  // src/runtime: internal to the runtime
#include "mpi_world.hpp"

namespace chimera::runtime {
namespace {

using chimera::testing::world_rank;
using chimera::testing::world_size;

class FakeGroup final : public backend::DeviceGroup {
 public:
  FakeGroup(std::string group_id, int group_size, int group_rank)
      : id(std::move(group_id)), size(group_size), rank(group_rank) {}
  std::uint64_t start_sum(float* /*data*/, std::size_t /*count*/) override { return 0; }
  std::uint64_t start_reduce_scatter(float* /*data*/,
                                     const std::vector<std::size_t>& /*bounds*/) override {
    return 0;
  }
  std::uint64_t start_all_gather(float* /*data*/,
                                 const std::vector<std::size_t>& /*bounds*/) override {
    return 0;
  }
  bool finished(std::uint64_t /*ticket*/) override { return true; }
  std::string id;
  int size;
  int rank;
};

// Two groups: the world (key 0) and, where there are 2+ ranks, the even ranks (key 1).
struct Comms {
  Comms() {
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2 == 0 ? 0 : MPI_UNDEFINED, world_rank(), &even);
  }
  ~Comms() {
    if (even != MPI_COMM_NULL) MPI_Comm_free(&even);
  }
  std::vector<std::pair<int, MPI_Comm>> list() const { return {{0, MPI_COMM_WORLD}, {1, even}}; }
  MPI_Comm even = MPI_COMM_NULL;
};

DeviceGroupMaker fake_maker(int failing_rank, bool fail_in_join) {
  return {[=] {
            CHIMERA_REQUIRE(fail_in_join || world_rank() != failing_rank, "no id on rank {}",
                            world_rank());
            return "id-from-" + std::to_string(world_rank());
          },
          [=](const std::string& id, int size, int rank) -> std::unique_ptr<backend::DeviceGroup> {
            CHIMERA_REQUIRE(!fail_in_join || world_rank() != failing_rank, "join failed on rank {}",
                            world_rank());
            return std::make_unique<FakeGroup>(id, size, rank);
          }};
}

TEST(DeviceGroupSetup, EveryMemberJoinsWithRankZerosId) {
  const Comms comms;
  auto groups = make_device_groups(MPI_COMM_WORLD, comms.list(), fake_maker(-1, false), 30.0);
  const auto& world = dynamic_cast<const FakeGroup&>(*groups.at(0));
  EXPECT_EQ(world.id, "id-from-0");
  EXPECT_EQ(world.size, world_size());
  EXPECT_EQ(world.rank, world_rank());
  EXPECT_EQ(groups.count(1), world_rank() % 2 == 0 ? 1U : 0U) << "joined only where a member";
}

// The id of one group cannot be made (rank 0 of the world), or the last rank's join fails: every
// rank leaves with that message, none is left waiting in a join or a broadcast.
TEST(DeviceGroupSetup, AFailureOnOneRankEndsEveryRankWithItsMessage) {
  const Comms comms;
  for (const bool in_join : {false, true}) {
    const int failing = in_join ? world_size() - 1 : 0;
    std::string message;
    int failed_rank = -1;
    try {
      make_device_groups(MPI_COMM_WORLD, comms.list(), fake_maker(failing, in_join), 30.0);
    } catch (const comm::AgreedError& e) {
      message = e.what();
      failed_rank = e.failed_rank();
    }
    EXPECT_EQ(failed_rank, failing);
    EXPECT_EQ(message, fmt::format("{} on rank {}", in_join ? "join failed" : "no id", failing));
  }
}

// Run only by the CTest entry test_mpi_device_group_setup.hang, which expects the watchdog's line:
// the last rank's join never returns (a rank stuck in ncclCommInitRank), and the job must end.
TEST(DeviceGroupSetup, AJoinThatNeverFinishesIsEndedByTheWatchdog) {
  if (std::getenv("CHIMERA_TEST_JOIN_HANGS") == nullptr) {
    GTEST_SKIP() << "set CHIMERA_TEST_JOIN_HANGS=1 (the job is meant to end in MPI_Abort)";
  }
  const Comms comms;
  DeviceGroupMaker maker = fake_maker(-1, false);
  const int last = world_size() - 1;
  maker.join = [last](const std::string& id, int size, int rank) {
    while (world_rank() == last) ::sleep(1);
    return std::make_unique<FakeGroup>(id, size, rank);
  };
  make_device_groups(MPI_COMM_WORLD, comms.list(), maker, 1.0);
  ADD_FAILURE() << "the hanging join was not ended";
}

}  // namespace
}  // namespace chimera::runtime
