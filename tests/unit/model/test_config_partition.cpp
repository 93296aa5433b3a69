// GPT2Config validation and the stage partition: balanced by cost, explicit lists, and the
// InputErrors for impossible layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/partition.hpp"

namespace chimera::model {
namespace {

GPT2Config make_config(int n_layer, int n_embd, int n_head, int n_ctx, int vocab) {
  ModelConfig m;
  m.n_layer = n_layer;
  m.n_embd = n_embd;
  m.n_head = n_head;
  m.n_ctx = n_ctx;
  m.vocab_size = vocab;
  return GPT2Config::from(m);
}

// The InputError's message, or "" when `f` does not throw one.
template <typename F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GPT2Config, PadsVocabularyToMultipleOf128) {
  EXPECT_EQ(make_config(1, 8, 2, 4, 50257).padded_vocab_size, 50304);
  EXPECT_EQ(make_config(1, 8, 2, 4, 509).padded_vocab_size, 512);
  EXPECT_EQ(make_config(1, 8, 2, 4, 128).padded_vocab_size, 128);
  EXPECT_EQ(make_config(1, 8, 2, 4, 1).padded_vocab_size, 128);
  EXPECT_EQ(make_config(1, 12, 3, 4, 10).head_size(), 4);
}

TEST(GPT2Config, EmbdNotDivisibleByHeadsNamesBothKeys) {
  const std::string msg = input_error([] { make_config(2, 100, 3, 16, 50); });
  EXPECT_NE(msg.find("model.n_embd = 100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.n_head = 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("102 or 99"), std::string::npos) << msg;
}

TEST(GPT2Config, NonPositiveSizesAreInputErrors) {
  EXPECT_NE(input_error([] { make_config(0, 8, 2, 4, 10); }).find("model.n_layer = 0"),
            std::string::npos);
  EXPECT_NE(input_error([] { make_config(1, 8, 2, 4, -5); }).find("model.vocab_size = -5"),
            std::string::npos);
  EXPECT_NE(input_error([] { make_config(1, 8, 0, 4, 10); }).find("model.n_head = 0"),
            std::string::npos);
}

TEST(GPT2Config, SeqLenBeyondContextIsInputError) {
  const GPT2Config c = make_config(1, 8, 2, 256, 10);
  EXPECT_NO_THROW(c.require_seq_len(256));
  const std::string msg = input_error([&] { c.require_seq_len(300); });
  EXPECT_NE(msg.find("data.seq_len = 300 exceeds model.n_ctx = 256"), std::string::npos) << msg;
  EXPECT_NE(input_error([&] { c.require_seq_len(0); }), "");
}

TEST(Partition, BalancedPutsTheHeadOnAnEmptierLastStage) {
  // Issue benchmark model: the head (2 C V) costs as much as 14 blocks.
  const GPT2Config small = make_config(4, 256, 4, 256, 50257);
  EXPECT_EQ(balanced_partition(small, 1, 256).blocks_per_stage(), (std::vector<int>{4}));
  EXPECT_EQ(balanced_partition(small, 2, 256).blocks_per_stage(), (std::vector<int>{3, 1}));
  EXPECT_EQ(balanced_partition(small, 4, 256).blocks_per_stage(), (std::vector<int>{1, 1, 1, 1}));
  // GPT-2 small, T = 1024: the head costs 4.46 blocks; the last stage gets one block, the other
  // eleven go 3-4-4 (as even as possible, fewer blocks first).
  const GPT2Config gpt2 = make_config(12, 768, 12, 1024, 50257);
  EXPECT_EQ(balanced_partition(gpt2, 4, 1024).blocks_per_stage(), (std::vector<int>{3, 4, 4, 1}));
  // A negligible head: blocks as even as possible, the last stage no heavier than the others.
  const GPT2Config tiny_vocab = make_config(6, 64, 2, 8, 2);
  EXPECT_EQ(balanced_partition(tiny_vocab, 4, 8).blocks_per_stage(),
            (std::vector<int>{1, 2, 2, 1}));
  EXPECT_EQ(balanced_partition(tiny_vocab, 6, 8).blocks_per_stage(), (std::vector<int>(6, 1)));
}

TEST(Partition, StageBookkeeping) {
  const StagePartition p({2, 1, 3});
  EXPECT_EQ(p.num_stages(), 3);
  EXPECT_EQ(p.first_block(2), 3);
  EXPECT_EQ(p.stage_of_block(0), 0);
  EXPECT_EQ(p.stage_of_block(2), 1);
  EXPECT_EQ(p.stage_of_block(5), 2);
  EXPECT_THROW(p.stage_of_block(6), Error);
  EXPECT_TRUE(p.is_first(0));
  EXPECT_TRUE(p.is_last(2));
  EXPECT_EQ(p.to_string(), "[2, 1, 3]");
}

TEST(Partition, MoreStagesThanBlocksIsInputError) {
  const GPT2Config c = make_config(4, 16, 2, 8, 10);
  const std::string msg = input_error([&] { balanced_partition(c, 5, 8); });
  EXPECT_NE(msg.find("5 model stages"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most 4"), std::string::npos) << msg;
  EXPECT_NE(input_error([&] { explicit_partition(c, 5, std::vector<int>{1, 1, 1, 1, 0}); }), "");
  EXPECT_NE(input_error([&] { balanced_partition(c, 0, 8); }), "");
}

TEST(Partition, ExplicitListIsChecked) {
  const GPT2Config c = make_config(4, 16, 2, 8, 10);
  const std::vector<int> ok{2, 1, 1};
  EXPECT_EQ(make_partition(c, 3, ok, 8).blocks_per_stage(), ok);
  EXPECT_EQ(make_partition(c, 3, {}, 8), balanced_partition(c, 3, 8));

  const std::string drops = input_error([&] {
    explicit_partition(c, 3, std::vector<int>{1, 1, 1});
  });
  EXPECT_NE(drops.find("parallel.partition = [1, 1, 1]"), std::string::npos) << drops;
  EXPECT_NE(drops.find("drops 1 block"), std::string::npos) << drops;
  const std::string repeats = input_error([&] {
    explicit_partition(c, 3, std::vector<int>{2, 2, 1});
  });
  EXPECT_NE(repeats.find("repeats 1 block"), std::string::npos) << repeats;
  const std::string length = input_error([&] { explicit_partition(c, 3, std::vector<int>{2, 2}); });
  EXPECT_NE(length.find("lists 2 stages but the pipeline has 3"), std::string::npos) << length;
  const std::string empty = input_error([&] {
    explicit_partition(c, 3, std::vector<int>{3, 0, 1});
  });
  EXPECT_NE(empty.find("gives stage 1 0 blocks"), std::string::npos) << empty;
}

}  // namespace
}  // namespace chimera::model
