#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/plan/layer_costs.hpp"
#include "chimera/plan/network.hpp"

namespace chimera::plan {
namespace {

TEST(Network, ParsesTimesBandwidthsAndTimesPerByte) {
  const Network a = parse_network("5us,10GB/s");
  EXPECT_DOUBLE_EQ(a.alpha_ms, 5e-3);
  EXPECT_DOUBLE_EQ(a.beta_ms_per_byte, 1e-7);  // 1 ms / 1e7 bytes
  const Network b = parse_network(" 0.002 ms , 0.5 ns/B ");
  EXPECT_DOUBLE_EQ(b.alpha_ms, 0.002);
  EXPECT_DOUBLE_EQ(b.beta_ms_per_byte, 0.5e-6);
  const Network c = parse_network("1s,800MB/s");
  EXPECT_DOUBLE_EQ(c.alpha_ms, 1000.0);
  EXPECT_DOUBLE_EQ(c.message_ms(8e8), 1000.0 + 1000.0);
}

TEST(Network, RabenseifnerAllreduce) {
  const Network n{0.01, 1e-6};
  EXPECT_DOUBLE_EQ(n.allreduce_ms(1e6, 1), 0.0);
  // 2 log2(8) alpha + 2 (7/8) beta L
  EXPECT_DOUBLE_EQ(n.allreduce_ms(1e6, 8), 6 * 0.01 + 1.75 * 1.0);
}

// Open MPI's in-place non-blocking allreduce: a binomial reduce and broadcast of the whole
// buffer, 2 ceil(log2 r) (alpha + beta L); measured on emulated hosts as 2.0 x beta L at r = 2.
TEST(Network, BinomialAllreduce) {
  const Network n = parse_network("10us,1GB/s,binomial");
  EXPECT_TRUE(n.binomial_allreduce);
  EXPECT_FALSE(parse_network("10us,1GB/s, rabenseifner").binomial_allreduce);
  EXPECT_DOUBLE_EQ(n.allreduce_ms(1e6, 2), 2 * (0.01 + 1.0));
  EXPECT_DOUBLE_EQ(n.allreduce_ms(1e6, 5), 6 * (0.01 + 1.0));  // ceil(log2 5) = 3 rounds
  EXPECT_THROW(parse_network("10us,1GB/s,ring"), InputError);
}

// MPI over TCP: messages above the size `chimera bench p2p` finds wait for their sender's progress.
TEST(Network, RendezvousSize) {
  EXPECT_FALSE(std::isfinite(parse_network("10us,1GB/s").rendezvous_bytes));
  const Network n = parse_network("10us,1GB/s,binomial,rendezvous=16384");
  EXPECT_TRUE(n.binomial_allreduce);
  EXPECT_DOUBLE_EQ(n.rendezvous_bytes, 16384);
  EXPECT_DOUBLE_EQ(parse_network("10us,1GB/s, rendezvous=0").rendezvous_bytes, 0);
  EXPECT_NE(describe(n).find("over 16384 B wait"), std::string::npos);
  EXPECT_THROW(parse_network("10us,1GB/s,rendezvous=16KiB"), InputError);
  EXPECT_THROW(parse_network("10us,1GB/s,rendezvous=-1"), InputError);
  EXPECT_THROW(parse_network("10us,1GB/s,rendezvous="), InputError);
}

// Two ranks of one host sharing its link: how much the later rank's flows weigh (`chimera bench
// sums` fits it); 1, max-min fair, unless given.
TEST(Network, LaterRankWeight) {
  EXPECT_DOUBLE_EQ(parse_network("10us,1GB/s").later_rank_weight, 1.0);
  const Network n = parse_network("10us,1GB/s,binomial,later-rank-weight=0.85");
  EXPECT_DOUBLE_EQ(n.later_rank_weight, 0.85);
  EXPECT_TRUE(n.binomial_allreduce);
  EXPECT_NE(describe(n).find("later ranks weighted 0.85"), std::string::npos);
  EXPECT_THROW(parse_network("10us,1GB/s,later-rank-weight=0"), InputError);
  EXPECT_THROW(parse_network("10us,1GB/s,later-rank-weight=1.5"), InputError);
  EXPECT_THROW(parse_network("10us,1GB/s,later-rank-weight=0.9x"), InputError);
}

// A link shaped to 100 MB/s whose token bucket passes up to 64 KiB at memory speed (10 GB/s,
// 5 us): the fit over all sizes misses the rate, the large-message fit finds it.
TEST(Network, LargeMessageFitFindsAShapedLinksRate) {
  std::vector<std::size_t> bytes;
  std::vector<double> seconds;
  for (std::size_t b = 4; b <= (std::size_t{16} << 20); b *= 4) {
    bytes.push_back(b);
    const double rate = b <= 65536 ? 1e10 : 1e8;
    seconds.push_back(5e-6 + static_cast<double>(b) / rate);
  }
  const HockneyFit large = fit_large_messages(bytes, seconds);
  EXPECT_NEAR(large.beta_s_per_byte, 1e-8, 1e-12);
  EXPECT_DOUBLE_EQ(large.alpha_s, seconds.front());
  EXPECT_EQ(large.from_bytes, std::size_t{1} << 20);  // 1, 4 and 16 MiB
  const HockneyFit all = fit_all_sizes(bytes, seconds);
  EXPECT_GT(std::abs(all.beta_s_per_byte / 1e-8 - 1), 0.2);
  // Two sizes: both go into beta.
  const HockneyFit two = fit_large_messages({4, 1000}, {1.0, 2.0});
  EXPECT_DOUBLE_EQ(two.beta_s_per_byte, 1.0 / 996);
  EXPECT_EQ(two.from_bytes, std::size_t{4});
}

TEST(Network, RejectsWhatIsNotAlphaCommaBeta) {
  for (const char* bad : {"5us", "5,10GB/s", "5us,10", "5us,10GB/h", "-1us,1GB/s", "x,1GB/s",
                          "5us,0GB/s", "5us,1ns"}) {
    EXPECT_THROW(parse_network(bad), InputError) << bad;
  }
  try {
    parse_network("5 parsecs,10GB/s");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ALPHA unit 'parsecs'"), std::string::npos) << e.what();
  }
}

constexpr const char* kCosts = R"(
machine = "test box"
[model]
n_embd = 64
n_head = 4
seq_len = 32
vocab_size = 1000
[scaling]
micro_batch_size = 2
overhead_ms = 0.5
stage_overhead_ms = 0.25
[embedding]
forward_ms = 0.1
backward_ms = 0.2
[block]
forward_ms = 2.5
backward_ms = 4.5
[head]
forward_ms = 1
backward_ms = 2
)";

TEST(LayerCosts, ParsesEveryKey) {
  const LayerCosts c = parse_layer_costs(kCosts, "test.toml");
  EXPECT_EQ(c.machine, "test box");
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.micro_batch_size, 2);
  EXPECT_DOUBLE_EQ(c.overhead_ms, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer_ns_per_param, 0.0);  // optional
  EXPECT_DOUBLE_EQ(c.block.backward_ms, 4.5);
  EXPECT_DOUBLE_EQ(c.head.forward_ms, 1.0);
  EXPECT_DOUBLE_EQ(c.stage_overhead_ms, 0.25);
}

TEST(LayerCosts, ScalesWithSamplesAboveTheOverhead) {
  const LayerCosts c = parse_layer_costs(kCosts, "test.toml");
  // overhead + (t - overhead) * b / B0
  const OpCost four = c.scaled(c.block, 4);
  EXPECT_DOUBLE_EQ(four.forward_ms, 0.5 + 2.0 * 2);
  EXPECT_DOUBLE_EQ(four.backward_ms, 0.5 + 4.0 * 2);
  const OpCost one = c.scaled(c.block, 1);
  EXPECT_DOUBLE_EQ(one.forward_ms, 0.5 + 2.0 / 2);
  // An op cheaper than the overhead does not go negative.
  const OpCost tiny = c.scaled(c.embedding, 1);
  EXPECT_DOUBLE_EQ(tiny.forward_ms, 0.1);
}

std::string error_of(const std::string& text) {
  try {
    parse_layer_costs(text, "c.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LayerCosts, ErrorsNameTheKey) {
  const std::string good = kCosts;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NE(
      error_of(replace("forward_ms = 2.5", "forwrd_ms = 2.5")).find("did you mean 'forward_ms'"),
      std::string::npos);
  EXPECT_NE(
      error_of(replace("backward_ms = 4.5", "backward_ms = -4.5")).find("'block.backward_ms'"),
      std::string::npos);
  EXPECT_NE(error_of(replace("[head]", "[tail]")).find("unknown key 'tail'"), std::string::npos);
  EXPECT_NE(error_of(replace("micro_batch_size = 2", "micro_batch_size = 0"))
                .find("'scaling.micro_batch_size' must be a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of(replace("seq_len = 32", "")).find("missing key 'model.seq_len'"),
            std::string::npos);
  EXPECT_NE(error_of("[model").find("invalid TOML"), std::string::npos);
  EXPECT_NE(error_of(replace("forward_ms = 2.5", "forward_ms = \"fast\"")).find("must be a number"),
            std::string::npos);
  EXPECT_THROW(load_layer_costs("/nonexistent/costs.toml"), InputError);
}

}  // namespace
}  // namespace chimera::plan
