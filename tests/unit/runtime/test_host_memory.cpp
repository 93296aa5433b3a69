#include <fmt/format.h>
#include <gtest/gtest.h>

#include "chimera/core/config.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "host_memory.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

Config small_model(int stages) {
  return Config::from_toml(fmt::format(R"(
[model]
n_layer = 4
n_embd = 32
n_head = 2
n_ctx = 16
vocab_size = 96
[parallel]
scheme = "gpipe"
stages = {}
micro_batches = 2
[data]
seq_len = 8
)",
                                       stages));
}

// The blocks' parameters the worker holds in the model's own layout, times 4 fp32 values.
std::int64_t held_block_state_bytes(const RunPlan& plan) {
  const model::ParameterLayout layout(plan.model, plan.partition);
  std::int64_t params = 0;
  for (const int stage : plan.topology.held) {
    for (const auto& t : layout.stage_tensors(stage)) {
      if (t.name.starts_with("h.")) params += static_cast<std::int64_t>(t.numel);
    }
  }
  return params * 16;
}

TEST(HostMemory, TheBoundIsTheBlocksOfTheMostLoadedWorker) {
  for (const int stages : {1, 2, 4}) {
    std::int64_t most = 0;
    for (int rank = 0; rank < stages; ++rank) {
      most =
          std::max(most, held_block_state_bytes(RunPlan::make(small_model(stages), stages, rank)));
    }
    EXPECT_EQ(parameter_state_bytes_per_worker(small_model(stages)), most) << stages << " stages";
  }
}

TEST(HostMemory, RefusesAModelLargerThanTheMachineBeforeBuildingAnything) {
  Config config = small_model(2);
  config.model.n_layer = 100'000'000;
  const auto why = exceeds_host_memory(config, std::int64_t{64} << 30);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("more than this machine's 64.0 GiB"), std::string::npos) << *why;
  EXPECT_FALSE(exceeds_host_memory(small_model(1), std::int64_t{1} << 30));
  EXPECT_FALSE(exceeds_host_memory(config, 0)) << "unknown memory: no verdict";
}

TEST(HostMemory, ThisMachineSaysHowMuchItHas) {
  EXPECT_GT(physical_memory_bytes(), std::int64_t{1} << 28);
}

}  // namespace
}  // namespace chimera::runtime
