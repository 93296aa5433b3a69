// Training on the CUDA backend gives the CPU backend's losses and weights (fp32; the tolerances
// of docs/cuda.md), through every message and gradient path this machine has. Without a usable
// GPU the same run must fail on every rank with one agreed InputError (exit status 2).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/comm/agreement.hpp"
#include "chimera/core/error.hpp"
#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

// Whether every rank has a usable GPU (agreed, so that all ranks take the same branch).
bool every_rank_has_a_gpu(std::string& why) {
  int have = 1;
  try {
    backend::make_backend(BackendKind::Cuda);
  } catch (const InputError& e) {
    why = e.what();
    have = 0;
  }
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return have == 1;
}

TEST(CudaTrain, WithoutAGpuEveryRankRefusesWithOneInputError) {
  std::string why;
  if (every_rank_has_a_gpu(why)) GTEST_SKIP() << "a GPU is present";
  const std::string dir = job_temp_dir("cuda-refuse");
  write_test_dataset(dir + "/tokens.h5", 2048, 3);
  Config cfg = tiny_config(dir + "/tokens.h5", "gpipe", world_size(), world_size(), 2);
  cfg.runtime.backend = BackendKind::Cuda;
  try {
    train(cfg, MPI_COMM_WORLD);
    ADD_FAILURE() << "runtime.backend = cuda trained without a GPU";
  } catch (const comm::AgreedError& e) {
    EXPECT_EQ(e.status(), 2) << e.what();
    EXPECT_NE(std::string(e.what()).find("runtime.backend = 'cuda'"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
  }
}

// `gpu_cfg` (runtime.backend = cuda) trained through every message and sum path this machine
// has gives `cpu`'s losses and weights (fp32 tolerances of docs/cuda.md).
void expect_every_path_matches(const Config& gpu_cfg, const runtime::Trainer& cpu,
                               const std::string& tag) {
  const int d = world_size();
  for (const auto& [messages, allreduce] :
       {std::pair{"auto", "auto"}, {"host", "mpi"}, {"auto", "nccl"}}) {
    Config cfg = gpu_cfg;
    cfg.runtime.messages = parse_enum<MessagesMode>(messages);
    cfg.runtime.allreduce = parse_enum<AllreduceMode>(allreduce);
    if (std::string(allreduce) == "nccl" && d > 1) continue;  // one GPU here: NCCL refuses sharing
    const auto gpu = train(cfg, MPI_COMM_WORLD);
    const std::string what = tag + "messages=" + messages + " allreduce=" + allreduce;
    ASSERT_EQ(gpu->losses().size(), cpu.losses().size()) << what;
    for (std::size_t s = 0; s < cpu.losses().size(); ++s) {
      EXPECT_NEAR(gpu->losses()[s], cpu.losses()[s], 1e-5 * cpu.losses()[s]) << what << s;
    }
    for (const auto& t : tensor_names(cfg)) {
      const auto mine = gpu->tensor(t);
      if (mine) {
        EXPECT_LE(relative_error(*mine, *cpu.tensor(t)), 1e-4) << what << " " << t;
      }
    }
  }
}

TEST(CudaTrain, LossesAndWeightsMatchTheCpuBackend) {
  std::string why;
  if (!every_rank_has_a_gpu(why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int d = world_size();
  const std::string dir = job_temp_dir("cuda-train");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 7);
  Config cpu_cfg = tiny_config(data, "gpipe", d, 2 * d, 2);
  cpu_cfg.parallel.shard_optimizer = false;  // the whole-buffer sums (the sharded: below)
  const auto cpu = train(cpu_cfg, MPI_COMM_WORLD);
  Config cfg = cpu_cfg;
  cfg.runtime.backend = BackendKind::Cuda;
  expect_every_path_matches(cfg, *cpu, "");
}

std::vector<double> joined(const runtime::Trainer& first, const runtime::Trainer& second) {
  std::vector<double> out = first.losses();
  out.insert(out.end(), second.losses().begin(), second.losses().end());
  return out;
}

// parallel.shard_optimizer on the GPU (Chimera at 2 ranks: each stage has two holders, so every
// buffer is cut in two; gpipe at 1 rank: a group of one): the reduce-scatter and all-gather
// through every sum path this machine has give the CPU's unsharded losses and weights; and a
// checkpoint whose moment parts came from the GPU resumes on the CPU unsharded, and the other way
// round, as the uninterrupted run.
TEST(CudaTrain, ShardedOptimizerMatchesTheUnshardedCpuRun) {
  std::string why;
  if (!every_rank_has_a_gpu(why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int d = world_size();
  if (d > 2) GTEST_SKIP() << "runs on 1 and 2 ranks";
  const std::string dir = job_temp_dir("cuda-sharded");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 9);
  Config cpu_cfg = tiny_config(data, d == 2 ? "chimera" : "gpipe", d, 2 * d, 2);
  cpu_cfg.train.steps = 4;
  cpu_cfg.parallel.shard_optimizer = false;
  const auto cpu = train(cpu_cfg, MPI_COMM_WORLD);
  Config gpu_cfg = cpu_cfg;
  gpu_cfg.runtime.backend = BackendKind::Cuda;
  gpu_cfg.parallel.shard_optimizer = true;
  expect_every_path_matches(gpu_cfg, *cpu, "sharded ");
  // GPU sharded for 2 steps, then CPU unsharded from its checkpoint; and the other way round.
  Config gpu_host = gpu_cfg;  // host staging: the path every machine has
  gpu_host.runtime.messages = MessagesMode::Host;
  gpu_host.runtime.allreduce = AllreduceMode::Mpi;
  const auto split = [&](Config first, Config then, const std::string& name) {
    first.checkpoint.dir = then.checkpoint.dir = dir + "/" + name;
    first.checkpoint.async = false;
    const auto a = train(first, MPI_COMM_WORLD, false, 2);
    const auto b = train(then, MPI_COMM_WORLD, true);
    return joined(*a, *b);
  };
  for (const auto& [losses, what] :
       {std::pair{split(gpu_host, cpu_cfg, "from-gpu"), "gpu sharded -> cpu"},
        {split(cpu_cfg, gpu_host, "from-cpu"), "cpu -> gpu sharded"}}) {
    ASSERT_EQ(losses.size(), cpu->losses().size()) << what;
    for (std::size_t s = 0; s < losses.size(); ++s)
      EXPECT_NEAR(losses[s], cpu->losses()[s], 1e-5 * cpu->losses()[s]) << what << " step " << s;
  }
}

}  // namespace
}  // namespace chimera::testing
