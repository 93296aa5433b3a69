// The runtime's central property: an iteration of any pipeline schedule over W x D ranks computes
// the gradient one process computes on the same global batch. Three training steps of every
// scheme must give the same losses and final parameters as the single-process run (1e-5).
#include <gtest/gtest.h>

#include <fmt/format.h>

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
};

std::string name(const Case& c, int d, int w) {
  return fmt::format("{}{}{}{} D={} W={} N={} wait={}", c.scheme, c.variant.empty() ? "" : " ",
                     c.variant, c.pipes ? fmt::format(" pipes={}", c.pipes) : "", d, w,
                     c.micro_batches_per_stage * d, c.wait);
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
  const auto pipelined = train(cfg, MPI_COMM_WORLD);

  // The reference: one process, no pipeline, the same W*N*B samples per step.
  Config ref = tiny_config(data, "gpipe", 1, w * n, 2);
  const auto single = train(ref, MPI_COMM_SELF);

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
    EXPECT_LE(relative_error(*mine, *single->tensor(t)), 1e-5) << what << " tensor " << t;
  }
  EXPECT_GT(compared, 0) << what << ": this rank holds no tensor";
}

class Equality : public ::testing::TestWithParam<Case> {};

std::string test_name(const ::testing::TestParamInfo<Case>& p) {
  std::string s = p.param.scheme + "_" + p.param.variant + "_p" + std::to_string(p.param.pipes) +
                  "_n" + std::to_string(p.param.micro_batches_per_stage) + "_" + p.param.wait;
  for (auto& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

TEST_P(Equality, MatchesSingleProcessTraining) {
  for (const int d : {2, 4, 8}) {
    if (world_size() % d != 0) continue;
    if (d == 8 && GetParam().pipes != 4) continue;  // 8-stage layouts: only 2f = 4 pipes
    if (GetParam().pipes == 4 && d != 8) continue;
    // The tiny model has 8 blocks; the V's cut it into 2D stages.
    const bool v_shape = GetParam().scheme == "zb-v" || GetParam().scheme == "dualpipev";
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
                      Case{"chimera", "direct", 0, 1, 1, "poll"}, Case{"chimera-zb", "", 0, 1, 2}),
    test_name);

}  // namespace
}  // namespace chimera::testing
