// Checkpoints through MPI: K steps, a checkpoint, --resume and K more steps are bit for bit the
// 2K uninterrupted steps; a checkpoint written at D = 4 loads at D = 2 with identical tensors.
#include <gtest/gtest.h>

#include <filesystem>

#include "chimera/io/checkpoint.hpp"
#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

TEST(Resume, SplitRunEqualsUninterruptedRunBitwise) {
  const std::string dir = job_temp_dir("resume");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 11);
  Config cfg = tiny_config(data, "chimera", 4, 4, 2);
  cfg.train.steps = 4;
  const auto whole = train(cfg, MPI_COMM_WORLD);

  cfg.checkpoint.dir = dir + "/ckpt";
  const auto first = train(cfg, MPI_COMM_WORLD, /*resume=*/false, /*stop_after=*/2);
  EXPECT_EQ(first->losses().size(), 2U);
  const auto second = train(cfg, MPI_COMM_WORLD, /*resume=*/true);
  EXPECT_EQ(second->losses().size(), 2U);

  std::vector<double> joined = first->losses();
  joined.insert(joined.end(), second->losses().begin(), second->losses().end());
  EXPECT_EQ(joined, whole->losses());  // bitwise
  for (const auto& t : tensor_names(cfg)) {
    const auto a = whole->tensor(t);
    const auto b = second->tensor(t);
    EXPECT_EQ(a.has_value(), b.has_value()) << t;
    if (a && b) {
      EXPECT_EQ(*a, *b) << t;  // bitwise
    }
    const auto m1 = whole->tensor("optim/exp_avg_sq/" + t);
    const auto m2 = second->tensor("optim/exp_avg_sq/" + t);
    if (m1 && m2) {
      EXPECT_EQ(*m1, *m2) << "exp_avg_sq of " << t;
    }
  }
}

TEST(Resume, CheckpointOfOnePartitionLoadsAtAnother) {
  const std::string dir = job_temp_dir("repartition");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 13);
  Config cfg = tiny_config(data, "chimera", 4, 4, 2);
  cfg.train.steps = 2;
  cfg.checkpoint.dir = dir + "/ckpt";
  const auto saved = train(cfg, MPI_COMM_WORLD);

  // Resume the same run at D = 2 (W = 2) with every step done: it only loads.
  Config other = cfg;
  other.parallel.stages = 2;
  other.parallel.micro_batches = 2;
  const auto loaded = train(other, MPI_COMM_WORLD, /*resume=*/true);
  EXPECT_TRUE(loaded->losses().empty());

  const io::CheckpointReader reader(*io::CheckpointDirectory(cfg.checkpoint.dir, 3).latest());
  int held = 0;
  for (const auto& t : tensor_names(cfg)) {
    const auto mine = loaded->tensor(t);
    if (!mine) continue;
    ++held;
    std::vector<float> file(mine->size());
    reader.read(t, file);
    EXPECT_EQ(*mine, file) << t;
    if (const auto before = saved->tensor(t)) {
      EXPECT_EQ(*mine, *before) << t;
    }
  }
  EXPECT_GT(held, 0);
}

}  // namespace
}  // namespace chimera::testing
