#pragma once
// Helpers of the `prep` tests: files in and out, scratch directories, and a token stream read
// back from a split's shards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chimera/data/dataset.hpp"
#include "chimera/data/tokenizer.hpp"

namespace chimera::data::testing {

inline const std::string kTokenizerDir = std::string(CHIMERA_SOURCE_DIR) + "/inputs/gpt2-tokenizer";

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An empty directory <TempDir>/<suite>/<name>.
inline std::filesystem::path temp_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / suite / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The token stream of a split: its shards' tokens, concatenated in order.
inline std::vector<std::int32_t> all_tokens(const std::vector<std::string>& paths) {
  const TokenDataset ds = TokenDataset::open(paths);
  std::vector<std::int32_t> tokens;
  for (std::size_t s = 0; s < ds.shards().size(); ++s) {
    std::vector<std::int32_t> shard(static_cast<std::size_t>(ds.shards()[s].tokens));
    ds.read_tokens(s, 0, shard);
    tokens.insert(tokens.end(), shard.begin(), shard.end());
  }
  return tokens;
}

// A fixture with GPT-2's tokenizer, loaded once per suite.
class WithTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = new Tokenizer(Tokenizer::load(kTokenizerDir)); }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static inline Tokenizer* tokenizer_ = nullptr;
};

}  // namespace chimera::data::testing
