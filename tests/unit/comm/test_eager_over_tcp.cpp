// When the runtime asks UCX to send every message eagerly: only for a job over several hosts
// without an RDMA device, and never over the user's own UCX_RNDV_THRESH.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "chimera/comm/eager_over_tcp.hpp"
#include "fake_env.hpp"

namespace chimera::comm {
namespace {

using testing::Env;
using testing::lookup;

class EagerOverTcp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("rdma-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  bool wanted(const Env& env) const { return eager_over_tcp_wanted(lookup(env), dir_.c_str()); }
  std::filesystem::path dir_;
};

TEST_F(EagerOverTcp, ASrunStepOverSeveralHostsWithoutRdmaSendsEagerly) {
  EXPECT_TRUE(wanted({{"SLURM_STEP_NUM_NODES", "4"}}));
  EXPECT_FALSE(wanted({{"SLURM_STEP_NUM_NODES", "1"}}));
}

TEST_F(EagerOverTcp, MpirunOverSeveralHostsSendsEagerly) {
  EXPECT_TRUE(wanted({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_FALSE(wanted({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
}

TEST_F(EagerOverTcp, OneHostOrAnUnknownLauncherKeepsUcxsChoice) {
  EXPECT_FALSE(wanted({}));
}

TEST_F(EagerOverTcp, TheUsersThresholdWins) {
  EXPECT_FALSE(wanted({{"SLURM_STEP_NUM_NODES", "4"}, {"UCX_RNDV_THRESH", "auto"}}));
}

TEST_F(EagerOverTcp, AnRdmaDeviceKeepsTheRendezvous) {
  std::ofstream(dir_ / "mlx5_0") << "";
  EXPECT_FALSE(wanted({{"SLURM_STEP_NUM_NODES", "4"}}));
}

}  // namespace
}  // namespace chimera::comm
