// parallel.shard_optimizer: each stage's AdamW moments split over the ranks holding it, the
// gradient sum a reduce-scatter into each rank's shard, the weights all-gathered after the step.
// A sharded run trains the same model as the unsharded one (losses over 20 steps to 1e-6
// relative, at W = 1, 2 and D = 2, 4), and its checkpoints hold the same full tensors: they
// resume unsharded and the other way round, and at another D and W.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "chimera/io/checkpoint.hpp"
#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

struct Case {
  std::string scheme;
  int virtual_stages = 1;
};

Config config_for(const std::string& data, const Case& c, int d, bool shard) {
  Config cfg = tiny_config(data, c.scheme, d, 2 * d, 2);
  cfg.parallel.virtual_stages = c.virtual_stages;
  cfg.parallel.shard_optimizer = shard;
  return cfg;
}

class ShardedOptimizer : public ::testing::TestWithParam<Case> {};

// The reduce-scatter adds the same addends as the allreduce, and AdamW is elementwise; the
// global norm adds its squares by shard rather than by tensor, so clipping may differ in the
// last bit: 1e-6 relative, not bit for bit.
TEST_P(ShardedOptimizer, TrainsAsTheUnshardedRun) {
  const Case& c = GetParam();
  const std::string dir = job_temp_dir("sharded");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 8192, 17);
  int layouts = 0;
  for (const int d : {2, 4}) {
    const int w = world_size() / d;
    if (world_size() % d != 0 || (w != 1 && w != 2) || c.virtual_stages * d > 8) continue;
    ++layouts;
    const std::string what = fmt::format("{} D={} W={}", c.scheme, d, w);
    Config cfg = config_for(data, c, d, false);
    cfg.train.steps = 20;
    const auto whole = train(cfg, MPI_COMM_WORLD);
    cfg.parallel.shard_optimizer = true;
    const auto sharded = train(cfg, MPI_COMM_WORLD);
    // Losses are reduced over the world: every rank sees the same, and asserts alike.
    ASSERT_EQ(sharded->losses().size(), 20U) << what;
    for (std::size_t s = 0; s < 20; ++s) {
      EXPECT_NEAR(sharded->losses()[s], whole->losses()[s], 1e-6 * whole->losses()[s])
          << what << " step " << s;
    }
    // Every holder has the whole weights again (the all-gather) and they are the same.
    int compared = 0;
    for (const auto& t : tensor_names(cfg)) {
      const auto a = sharded->tensor(t);
      const auto b = whole->tensor(t);
      EXPECT_EQ(a.has_value(), b.has_value()) << what << " " << t;
      if (!a || !b) continue;
      ++compared;
      EXPECT_LE(relative_error(*a, *b), 1e-5) << what << " tensor " << t;
    }
    EXPECT_GT(compared, 0) << what;
  }
  if (layouts == 0) GTEST_SKIP() << "no layout with W = 1 or 2 at " << world_size() << " ranks";
}

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  std::string s = p.param.scheme;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Schemes, ShardedOptimizer,
                         ::testing::Values(Case{"chimera"}, Case{"chimera-zb"}, Case{"1f1b"},
                                           Case{"interleaved", 2}),
                         case_name);

// A GPU backend without NCCL sums through host staging (StagedShardedSum, HostStagedSum): the
// test hook CHIMERA_TEST_STAGED_SUMS runs that path over the CPU backend. Its ring adds the same
// numbers in the same order as the ring on the buffers themselves, so training is bit for bit the
// same, sharded and unsharded; and the path must really have been taken (its log line).
TEST(ShardedOptimizer, HostStagedSumsTrainBitForBitAsSumsOnTheBuffers) {
  if (world_size() != 2 && world_size() != 4) GTEST_SKIP() << "runs on 2 and 4 ranks";
  const std::string dir = job_temp_dir("staged");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 8192, 23);
  struct StagedSums {  // on every rank alike
    StagedSums() { setenv("CHIMERA_TEST_STAGED_SUMS", "1", 1); }
    ~StagedSums() { unsetenv("CHIMERA_TEST_STAGED_SUMS"); }
  };
  for (const bool shard : {true, false}) {
    Config cfg = config_for(data, Case{"chimera"}, 2, shard);
    cfg.train.steps = 6;
    const auto direct = train(cfg, MPI_COMM_WORLD);
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    std::unique_ptr<runtime::Trainer> staged;
    {
      const StagedSums hook;
      staged = train(cfg, MPI_COMM_WORLD);
    }
    const std::string log =
        ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
    const std::string what = shard ? "sharded" : "unsharded";
    if (world_rank() == 0) {
      EXPECT_NE(log.find("CHIMERA_TEST_STAGED_SUMS"), std::string::npos) << what << ": " << log;
    }
    EXPECT_EQ(staged->losses(), direct->losses()) << what;
    for (const auto& t : tensor_names(cfg)) {
      const auto a = staged->tensor(t);
      const auto b = direct->tensor(t);
      EXPECT_EQ(a.has_value(), b.has_value()) << what << " " << t;
      if (a && b) {
        EXPECT_EQ(*a, *b) << what << " " << t;
      }
    }
  }
}

void expect_losses_near(const std::vector<double>& a, const std::vector<double>& b, double rel,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t s = 0; s < a.size(); ++s)
    EXPECT_NEAR(a[s], b[s], rel * std::abs(b[s])) << what << " step " << s;
}

std::vector<double> joined(const runtime::Trainer& first, const runtime::Trainer& second) {
  std::vector<double> out = first.losses();
  out.insert(out.end(), second.losses().begin(), second.losses().end());
  return out;
}

// Chimera D = 2 on 4 ranks (W = 2: every stage has 4 holders, so every moment is cut in four
// parts that four ranks write into one file).
TEST(ShardedCheckpoint, ResumesShardedUnshardedAndAtAnotherLayout) {
  if (world_size() != 4) GTEST_SKIP() << "runs on 4 ranks";
  const std::string dir = job_temp_dir("sharded_ckpt");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 8192, 19);
  const Case chimera{"chimera"};
  Config plain = config_for(data, chimera, 2, false);
  plain.train.steps = 4;
  Config sharded = plain;
  sharded.parallel.shard_optimizer = true;
  const auto plain_whole = train(plain, MPI_COMM_WORLD);
  const auto sharded_whole = train(sharded, MPI_COMM_WORLD);

  // Sharded, split and resumed sharded: bit for bit (asynchronous saves: raw pieces).
  Config a = sharded;
  a.checkpoint.dir = dir + "/a";
  const auto a1 = train(a, MPI_COMM_WORLD, false, 2);
  // Its checkpoint of step 2, for the resumes at D = 4 below.
  for (const char* copy : {"/d4s", "/d4"}) {
    if (world_rank() == 0)
      std::filesystem::copy(a.checkpoint.dir, dir + copy, std::filesystem::copy_options::recursive);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto a2 = train(a, MPI_COMM_WORLD, true);
  EXPECT_EQ(joined(*a1, *a2), sharded_whole->losses());

  // The sharded checkpoint holds the same full tensors as the unsharded run's (synchronous
  // saves: HDF5 hyperslabs).
  Config b = plain;
  b.checkpoint.dir = dir + "/b";
  b.checkpoint.async = false;
  const auto b1 = train(b, MPI_COMM_WORLD, false, 2);
  Config c = sharded;
  c.checkpoint.dir = dir + "/c";
  c.checkpoint.async = false;
  const auto c1 = train(c, MPI_COMM_WORLD, false, 2);
  {
    const io::CheckpointReader rb(*io::CheckpointDirectory(b.checkpoint.dir, 3).latest());
    const io::CheckpointReader rc(*io::CheckpointDirectory(c.checkpoint.dir, 3).latest());
    for (const auto& t : tensor_names(plain)) {
      for (const auto& name : {t, io::exp_avg_name(t), io::exp_avg_sq_name(t)}) {
        const auto shape = rb.shape(name);
        ASSERT_TRUE(shape.has_value()) << name;
        std::int64_t n = 1;
        for (const auto x : *shape) n *= x;
        std::vector<float> x(static_cast<std::size_t>(n)), y(x.size());
        rb.read(name, x);
        rc.read(name, y);
        EXPECT_LE(relative_error(y, x), 1e-5) << name;
      }
    }
  }
  // Sharded -> unsharded, and unsharded -> sharded.
  Config c2 = plain;
  c2.checkpoint.dir = c.checkpoint.dir;
  const auto c_resumed = train(c2, MPI_COMM_WORLD, true);
  expect_losses_near(joined(*c1, *c_resumed), plain_whole->losses(), 1e-6, "sharded->unsharded");
  Config b2 = sharded;
  b2.checkpoint.dir = b.checkpoint.dir;
  const auto b_resumed = train(b2, MPI_COMM_WORLD, true);
  expect_losses_near(joined(*b1, *b_resumed), plain_whole->losses(), 1e-6, "unsharded->sharded");

  // At another layout: the sharded D = 2 x W = 2 checkpoint of step 2 resumed at D = 4 x W = 1
  // (Chimera's two replicas: 2 holders per stage), sharded and unsharded; the same 16 samples
  // per step, summed in another order: 1e-5.
  for (const bool shard : {true, false}) {
    Config other = config_for(data, chimera, 4, shard);
    other.train.steps = 4;
    other.checkpoint.dir = dir + (shard ? "/d4s" : "/d4");
    const auto resumed = train(other, MPI_COMM_WORLD, true);
    expect_losses_near(joined(*a1, *resumed), plain_whole->losses(), 1e-5,
                       shard ? "D=2 sharded -> D=4 sharded" : "D=2 sharded -> D=4 unsharded");
  }
}

}  // namespace
}  // namespace chimera::testing
