// The runtime's central property: an iteration of any pipeline schedule over W x D ranks computes
// the gradient one process computes on the same global batch. Three training steps of every
// scheme must give the same losses and final parameters as the single-process run (1e-5). A
// subset of the schemes, at one layout each, checks the same with bf16 GEMMs (bf16-emulated on any
// CPU, and oneDNN's bf16 where the CPU has bf16 units; both runs alike), where the parameters get a
// wider tolerance (bf16_step_tolerance.hpp says why).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "bf16_step_tolerance.hpp"
#include "cpu_precision.hpp"
#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

struct Case {
  std::string scheme;
  std::string variant;  // chimera
  int pipes = 0;        // chimera
  int virtual_stages = 1;
  int micro_batches_per_stage = 1;  // N = this * D
  std::string wait = "doorbell";    // runtime.wait: how a waiting rank sleeps
  // runtime.precision of the pipelined run and of the reference. A case with `stages` set runs
  // only at that D, on a world of `ranks` ranks (the fp32 cases run at every D the world allows).
  std::string precision = "fp32";
  int stages = 0;
  int ranks = 0;
  bool shard_optimizer = false;  // parallel.shard_optimizer in the pipelined run
};

std::string name(const Case& c, int d, int w) {
  return fmt::format("{}{}{}{} D={} W={} N={} wait={} {}{}", c.scheme, c.variant.empty() ? "" : " ",
                     c.variant, c.pipes ? fmt::format(" pipes={}", c.pipes) : "", d, w,
                     c.micro_batches_per_stage * d, c.wait, c.precision,
                     c.shard_optimizer ? " sharded" : "");
}

void expect_equal_to_single_process(const Case& c, int d) {
  const int w = world_size() / d;
  const std::string dir = job_temp_dir("equality");
  const std::string data = dir + "/tokens.h5";
  write_test_dataset(data, 4096, 7);
  const int n = c.micro_batches_per_stage * d;
  Config cfg = tiny_config(data, c.scheme, d, n, 2);
  cfg.parallel.variant = c.variant.empty() ? "direct" : c.variant;
  cfg.parallel.pipes = c.pipes;
  cfg.parallel.virtual_stages = c.virtual_stages;
  cfg.runtime.wait = parse_enum<WaitMode>(c.wait);
  cfg.runtime.precision = c.precision;
  cfg.parallel.shard_optimizer = c.shard_optimizer;
  const auto pipelined = train(cfg, MPI_COMM_WORLD);

  // The reference: one process, no pipeline, the same W*N*B samples per step.
  Config ref = tiny_config(data, "gpipe", 1, w * n, 2);
  ref.runtime.precision = c.precision;
  const auto single = train(ref, MPI_COMM_SELF);
  // Parameters: the fp32 sums of a pipeline only run in another order; bf16 rounding of the GEMM
  // operands turns those last-bit differences into larger ones over the steps.
  const double tensor_tol = c.precision == "fp32" ? 1e-5 : kBf16ReorderedSumsTol;

  const std::string what = name(c, d, w);
  // Losses are reduced over the world, so every rank sees the same: no rank-dependent skip here.
  EXPECT_EQ(pipelined->losses().size(), 3U) << what;
  for (std::size_t s = 0; s < std::min<std::size_t>(3, pipelined->losses().size()); ++s) {
    EXPECT_NEAR(pipelined->losses()[s], single->losses()[s], 1e-5 * single->losses()[s])
        << what << " step " << s;
  }
  int compared = 0;
  for (const auto& t : tensor_names(cfg)) {
    const auto mine = pipelined->tensor(t);
    if (!mine) continue;
    ++compared;
    EXPECT_LE(relative_error(*mine, *single->tensor(t)), tensor_tol) << what << " tensor " << t;
  }
  EXPECT_GT(compared, 0) << what << ": this rank holds no tensor";
}

class Equality : public ::testing::TestWithParam<Case> {};

std::string test_name(const ::testing::TestParamInfo<Case>& p) {
  std::string s = p.param.scheme + "_" + p.param.variant + "_p" + std::to_string(p.param.pipes) +
                  "_n" + std::to_string(p.param.micro_batches_per_stage) + "_" + p.param.wait;
  if (p.param.stages) {
    s += fmt::format("_{}_d{}_r{}", p.param.precision, p.param.stages, p.param.ranks);
  }
  for (auto& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

TEST_P(Equality, MatchesSingleProcessTraining) {
  // The same CPU on every rank of this test: every rank skips alike.
  CHIMERA_SKIP_UNLESS_CPU_RUNS(GetParam().precision);
  if (GetParam().stages) {
    if (world_size() != GetParam().ranks) {
      GTEST_SKIP() << "runs on " << GetParam().ranks << " ranks";
    }
    expect_equal_to_single_process(GetParam(), GetParam().stages);
    return;
  }
  for (const int d : {2, 4, 8}) {
    if (world_size() % d != 0) continue;
    if (d == 8 && GetParam().pipes != 4) continue;  // 8-stage layouts: only 2f = 4 pipes
    if (GetParam().pipes == 4 && d != 8) continue;
    // The tiny model has 8 blocks; the V's cut it into 2D stages.
    const bool v_shape = GetParam().scheme == "zb-v" || GetParam().scheme == "dualpipev" ||
                         GetParam().scheme.starts_with("bitpipe") ||
                         GetParam().scheme.starts_with("v-");
    if ((v_shape ? 2 : GetParam().virtual_stages) * d > 8) continue;
    expect_equal_to_single_process(GetParam(), d);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, Equality,
    ::testing::Values(Case{"gpipe", "", 0, 1, 1}, Case{"1f1b", "", 0, 1, 1},
                      Case{"gems", "", 0, 1, 1}, Case{"interleaved", "", 0, 2, 1},
                      Case{"zb-h1", "", 0, 1, 1}, Case{"zb-v", "", 0, 1, 1},
                      Case{"zb-v", "", 0, 1, 2}, Case{"dualpipev", "", 0, 1, 2},
                      Case{"chimera", "direct", 0, 1, 1}, Case{"chimera", "direct", 0, 1, 2},
                      Case{"chimera", "doubling", 0, 1, 2}, Case{"chimera", "halving", 0, 1, 2},
                      Case{"chimera", "direct", 4, 1, 1},
                      Case{"chimera", "direct", 0, 1, 1, "poll"}, Case{"chimera-zb", "", 0, 1, 2},
                      Case{"bitpipe", "", 0, 1, 2}, Case{"bitpipe-zb", "", 0, 1, 2},
                      Case{"v-half", "", 0, 1, 2}, Case{"v-min", "", 0, 1, 2}),
    test_name);

// bf16 at one layout per scheme (the fp32 cases above cover the layouts): the schedules whose
// sums keep the single process's order (W = 1, one replica) and those that reorder them (data
// parallelism, Chimera's two replicas), the split backward and virtual stages.
Case bf16_case(Case c, int stages, int ranks, const char* precision = "bf16-emulated") {
  c.precision = precision;
  c.stages = stages;
  c.ranks = ranks;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Bf16, Equality,
                         ::testing::Values(bf16_case({"gpipe", "", 0, 1, 1}, 2, 2),
                                           bf16_case({"interleaved", "", 0, 2, 1}, 2, 2),
                                           bf16_case({"1f1b", "", 0, 1, 1}, 2, 4),
                                           bf16_case({"zb-h1", "", 0, 1, 1}, 4, 4),
                                           bf16_case({"chimera", "direct", 0, 1, 1}, 4, 4)),
                         test_name);

// The same on oneDNN's bf16 kernels (skipped, saying why, on a CPU without bf16 units).
INSTANTIATE_TEST_SUITE_P(OnednnBf16, Equality,
                         ::testing::Values(bf16_case({"gpipe", "", 0, 1, 1}, 2, 2, "bf16"),
                                           bf16_case({"1f1b", "", 0, 1, 1}, 2, 4, "bf16"),
                                           bf16_case({"zb-h1", "", 0, 1, 1}, 4, 4, "bf16"),
                                           bf16_case({"chimera", "direct", 0, 1, 1}, 4, 4, "bf16")),
                         test_name);

// The bf16 cases above would compare two fp32 runs if the runtime dropped runtime.precision: the
// single-process reference in bf16-emulated must not be fp32's bit for bit.
TEST(EqualityPrecision, Bf16ReferenceIsNotFp32) {
  if (world_size() != 2) GTEST_SKIP() << "one world size is enough";
  const std::string data = job_temp_dir("equality") + "/tokens.h5";
  write_test_dataset(data, 4096, 7);
  Config cfg = tiny_config(data, "gpipe", 1, 2, 2);
  const auto fp32 = train(cfg, MPI_COMM_SELF);
  cfg.runtime.precision = "bf16-emulated";
  const auto bf16 = train(cfg, MPI_COMM_SELF);
  EXPECT_NE(bf16->losses(), fp32->losses()) << "the bf16-emulated run trained in fp32";
}

// The same property with the optimizer state sharded over each stage's holders: the summed
// gradient reaches AdamW as a reduce-scatter's shards, the weights return by an all-gather.
Case sharded(Case c) {
  c.shard_optimizer = true;
  return c;
}

INSTANTIATE_TEST_SUITE_P(ShardedOptimizer, Equality,
                         ::testing::Values(sharded({"gpipe", "", 0, 1, 1}),
                                           sharded({"interleaved", "", 0, 2, 1}),
                                           sharded({"zb-h1", "", 0, 1, 1}),
                                           sharded({"chimera", "direct", 0, 1, 1}),
                                           sharded({"chimera", "halving", 0, 1, 2}),
                                           sharded({"chimera-zb", "", 0, 1, 2})),
                         test_name);

}  // namespace
}  // namespace chimera::testing
