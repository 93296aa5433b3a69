// Training on the CUDA backend gives the CPU backend's losses and weights (fp32; the tolerances
// of docs/cuda.md), through every message and gradient path this machine has. Without a usable
// GPU the same run must fail on every rank with one agreed InputError (exit status 2).
#include <gtest/gtest.h>

#include <utility>

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

TEST(CudaTrain, LossesAndWeightsMatchTheCpuBackend) {
  std::string why;
  if (!every_rank_has_a_gpu(why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int d = world_size();
  const std::string dir = job_temp_dir("cuda-train");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 7);
  const Config cpu_cfg = tiny_config(data, "gpipe", d, 2 * d, 2);
  const auto cpu = train(cpu_cfg, MPI_COMM_WORLD);
  for (const auto& [messages, allreduce] :
       {std::pair{"auto", "auto"}, {"host", "mpi"}, {"auto", "nccl"}}) {
    Config cfg = cpu_cfg;
    cfg.runtime.backend = BackendKind::Cuda;
    cfg.runtime.messages = parse_enum<MessagesMode>(messages);
    cfg.runtime.allreduce = parse_enum<AllreduceMode>(allreduce);
    if (std::string(allreduce) == "nccl" && d > 1) continue;  // one GPU here: NCCL refuses sharing
    const auto gpu = train(cfg, MPI_COMM_WORLD);
    const std::string what = std::string("messages=") + messages + " allreduce=" + allreduce;
    ASSERT_EQ(gpu->losses().size(), cpu->losses().size()) << what;
    for (std::size_t s = 0; s < cpu->losses().size(); ++s) {
      EXPECT_NEAR(gpu->losses()[s], cpu->losses()[s], 1e-5 * cpu->losses()[s]) << what << s;
    }
    for (const auto& t : tensor_names(cfg)) {
      const auto mine = gpu->tensor(t);
      if (mine) {
        EXPECT_LE(relative_error(*mine, *cpu->tensor(t)), 1e-4) << what << " " << t;
      }
    }
  }
}

}  // namespace
}  // namespace chimera::testing
