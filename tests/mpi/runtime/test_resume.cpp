// Checkpoints through MPI: K steps, a checkpoint, --resume and K more steps are bit for bit the
// 2K uninterrupted steps; a checkpoint written at D = 4 loads at D = 2 with identical tensors.
#include <gtest/gtest.h>

#include <filesystem>

#include "chimera/io/checkpoint.hpp"
#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

// One process: the whole model; four ranks: Chimera D = 4. Whole moments, so that every holder's
// can be compared (a sharded run's resume: test_sharded.cpp).
Config resume_config(const std::string& data) {
  Config cfg = world_size() == 1 ? tiny_config(data, "gpipe", 1, 4, 2)
                                 : tiny_config(data, "chimera", 4, 4, 2);
  cfg.parallel.shard_optimizer = false;
  return cfg;
}

TEST(Resume, SplitRunEqualsUninterruptedRunBitwise) {
  const std::string dir = job_temp_dir("resume");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 11);
  Config cfg = resume_config(data);
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

// Written at one partition (D = 4, or D = 1 in one process), resumed at every other that fits
// (D = 2 and D = 1 with W = 2 and 4): the loaded tensors equal the file's and the writer's.
TEST(Resume, CheckpointOfOnePartitionLoadsAtAnother) {
  const std::string dir = job_temp_dir("repartition");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 13);
  Config cfg = resume_config(data);
  cfg.train.steps = 2;
  cfg.checkpoint.dir = dir + "/ckpt";
  const auto saved = train(cfg, MPI_COMM_WORLD);
  const io::CheckpointReader reader(*io::CheckpointDirectory(cfg.checkpoint.dir, 3).latest());

  for (const int d : {4, 2, 1}) {
    if (d == cfg.parallel.stages || world_size() % d != 0) continue;
    Config other = cfg;
    other.parallel.scheme = d == 1 ? "gpipe" : "chimera";
    other.parallel.stages = d;
    other.parallel.micro_batches = d == 1 ? 2 : d;
    // Every step is done already: the run only loads.
    const auto loaded = train(other, MPI_COMM_WORLD, /*resume=*/true);
    EXPECT_TRUE(loaded->losses().empty()) << "D=" << d;
    int held = 0;
    for (const auto& t : tensor_names(cfg)) {
      const auto mine = loaded->tensor(t);
      if (!mine) continue;
      ++held;
      std::vector<float> file(mine->size());
      reader.read(t, file);
      EXPECT_EQ(*mine, file) << "D=" << d << " " << t;
      if (const auto before = saved->tensor(t)) {
        EXPECT_EQ(*mine, *before) << "D=" << d << " " << t;
      }
    }
    EXPECT_GT(held, 0) << "D=" << d;
  }
}

}  // namespace
}  // namespace chimera::testing
