// The node-local rank's rule against fake environments: which launcher variable wins, when
// SLURM_LOCALID is trusted, and malformed values.
#include <gtest/gtest.h>

#include <string>

#include "chimera/comm/local_rank.hpp"
#include "chimera/core/error.hpp"
#include "fake_env.hpp"

namespace chimera::comm {
namespace {

using testing::Env;
using testing::lookup;

std::string source_of(const Env& env) {
  const auto r = launcher_local_rank(lookup(env));
  return r ? std::string(r->source_name()) : "none";
}

TEST(LauncherLocalRank, SrunGivesSlurmLocalId) {
  const Env env{{"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "12"}};
  const auto r = launcher_local_rank(lookup(env));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->source_name(), "SLURM_LOCALID");
}

TEST(LauncherLocalRank, MpirunInAnAllocationBeatsTheInheritedSlurmLocalId) {
  // Open MPI's daemons are an srun step, so its ranks see SLURM_STEP_ID and SLURM_LOCALID=0 too.
  const Env env{
      {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  const auto r = launcher_local_rank(lookup(env));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->source_name(), "OMPI_COMM_WORLD_LOCAL_RANK");
}

TEST(LauncherLocalRank, EveryMpiLauncherBeatsSlurm) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                           "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID"}) {
    const Env env{{"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "3"}, {name, "2"}};
    EXPECT_EQ(source_of(env), name);
    EXPECT_EQ(launcher_local_rank(lookup(env))->rank, 2) << name;
  }
}

TEST(LauncherLocalRank, SlurmLocalIdOutsideAnSrunStepIsNotTrusted) {
  // The batch script's own SLURM_LOCALID, inherited by a launcher that sets nothing.
  EXPECT_EQ(source_of(Env{{"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "12"}}), "none");
  EXPECT_EQ(source_of(Env{}), "none");
  EXPECT_EQ(
      source_of(
          Env{{"OMPI_COMM_WORLD_LOCAL_RANK", ""}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"}}),
      "SLURM_LOCALID")
      << "an empty variable says nothing";
}

TEST(LauncherLocalRank, MalformedValueIsAnInputErrorNamingTheVariable) {
  for (const char* bad : {"x3", "3x", "-1", " 1", "99999999999"}) {
    const Env env{{"MPI_LOCALRANKID", bad}};
    try {
      launcher_local_rank(lookup(env));
      ADD_FAILURE() << "accepted MPI_LOCALRANKID='" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_LOCALRANKID"), std::string::npos) << e.what();
    }
  }
}

TEST(DescribeNodeLocalRanks, OneSourceOnceElsePerRank) {
  EXPECT_EQ(describe_node_local_ranks({{0, 5}, {1, 5}, {0, 5}, {1, 5}}),
            "node-local ranks (SLURM_LOCALID): 0 1 0 1");
  EXPECT_EQ(describe_node_local_ranks({{0, 0}, {0, 6}}),
            "node-local ranks: 0 (OMPI_COMM_WORLD_LOCAL_RANK) 0 (MPI_Comm_split_type)");
}

}  // namespace
}  // namespace chimera::comm
