// `prep` as a library: documents and end-of-text tokens, the train/validation split, .gz input,
// piecewise reading, and bad input.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/data/prep.hpp"
#include "chimera/data/tokenizer.hpp"
#include "prep_testing.hpp"

namespace chimera::data {
namespace {

namespace fs = std::filesystem;

using namespace testing;  // the prep test helpers (prep_testing.hpp)

const std::string kFixture =
    std::string(CHIMERA_SOURCE_DIR) + "/tests/unit/data/fixtures/multilingual.txt";

fs::path temp_dir(const std::string& name) {
  return testing::temp_dir("chimera_prep_test", name);
}

class PrepTest : public WithTokenizer {};

TEST_F(PrepTest, DocumentsDecodeBackToTheInputs) {
  const fs::path dir = temp_dir("documents");
  const std::string second = (dir / "second.txt").string();
  std::ofstream(second) << "Second document.\nWith two lines and a <|endoftext|> inside.";
  PrepOptions options;
  options.tokenizer_dir = kTokenizerDir;
  options.output_dir = (dir / "out").string();
  options.inputs = {kFixture, second};
  options.val_fraction = 0;
  options.piece_bytes = 64;  // many pieces: cuts must not change the tokens
  const PrepResult result = prepare_dataset(options);
  EXPECT_TRUE(result.val_paths.empty());
  EXPECT_EQ(result.documents, 2 + 2 + 1);  // two files, literal separators: 2 + 1
  const auto tokens = all_tokens(result.train_paths);
  const std::string expected =
      "<|endoftext|>" + read_bytes(kFixture) + "<|endoftext|>" + read_bytes(second);
  EXPECT_EQ(tokenizer_->decode(tokens), expected);
  std::vector<std::int32_t> reference;
  tokenizer_->encode(expected, reference);
  EXPECT_EQ(tokens, reference);
  EXPECT_EQ(result.text_bytes, read_bytes(kFixture).size() + read_bytes(second).size());
}

TEST_F(PrepTest, ValidationSplitTakesTheEndOfEveryBlock) {
  const fs::path dir = temp_dir("split");
  PrepOptions options;
  options.tokenizer_dir = kTokenizerDir;
  options.output_dir = (dir / "out").string();
  options.inputs = {kFixture};
  options.val_fraction = 0.25;
  options.split_block = 40;  // 30 train + 10 val tokens per block
  const PrepResult result = prepare_dataset(options);
  const auto train = all_tokens(result.train_paths), val = all_tokens(result.val_paths);
  const std::vector<std::int32_t> whole = [&] {
    std::vector<std::int32_t> t{tokenizer_->eos_token()};
    tokenizer_->encode(read_bytes(kFixture), t);
    return t;
  }();
  // Rebuild the stream from the blocks, dropping the end-of-text marks the split inserted.
  std::vector<std::int32_t> rebuilt;
  std::size_t t = 0, v = 0;
  const int eos = tokenizer_->eos_token();
  for (std::size_t block = 0; rebuilt.size() < whole.size(); ++block) {
    for (int k = 0; k < 30 && rebuilt.size() < whole.size(); ++k) {
      if (block > 0 && k == 0 && train[t] == eos && whole[rebuilt.size()] != eos) ++t;
      rebuilt.push_back(train[t++]);
    }
    for (int k = 0; k < 10 && rebuilt.size() < whole.size(); ++k) {
      if (block > 0 && k == 0 && val[v] == eos && whole[rebuilt.size()] != eos) ++v;
      rebuilt.push_back(val[v++]);
    }
  }
  EXPECT_EQ(rebuilt, whole);
  EXPECT_EQ(t, train.size());
  EXPECT_EQ(v, val.size());
}

TEST_F(PrepTest, GzipInputGivesTheSameTokens) {
  const fs::path dir = temp_dir("gzip");
  const std::string text = read_bytes(kFixture);
  const std::string gz = (dir / "fixture.txt.gz").string();
  gzFile out = gzopen(gz.c_str(), "wb");
  gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  gzclose(out);
  PrepOptions options;
  options.tokenizer_dir = kTokenizerDir;
  options.val_fraction = 0;
  options.inputs = {gz};
  options.output_dir = (dir / "gz").string();
  const auto from_gz = all_tokens(prepare_dataset(options).train_paths);
  options.inputs = {kFixture};
  options.output_dir = (dir / "plain").string();
  EXPECT_EQ(from_gz, all_tokens(prepare_dataset(options).train_paths));
}

TEST_F(PrepTest, InvalidUtf8NamesFileAndOffsetOrIsReplaced) {
  const fs::path dir = temp_dir("utf8");
  const std::string bad = (dir / "bad.txt").string();
  std::ofstream(bad, std::ios::binary) << "line one\nline two\nbad \xFF here\n";
  PrepOptions options;
  options.tokenizer_dir = kTokenizerDir;
  options.output_dir = (dir / "out").string();
  options.inputs = {bad};
  options.piece_bytes = 8;
  try {
    prepare_dataset(options);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(bad), std::string::npos) << what;
    EXPECT_NE(what.find("byte offset 22"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5"));
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5.tmp"));
  options.invalid_utf8 = InvalidUtf8::Replace;
  options.val_fraction = 0;
  const auto tokens = all_tokens(prepare_dataset(options).train_paths);
  EXPECT_EQ(tokenizer_->decode(tokens), "<|endoftext|>line one\nline two\nbad \xEF\xBF\xBD here\n");
}

TEST_F(PrepTest, MissingInputAndUnwritableOutputAreInputErrors) {
  const fs::path dir = temp_dir("bad");
  PrepOptions options;
  options.tokenizer_dir = kTokenizerDir;
  options.output_dir = (dir / "out").string();
  options.inputs = {(dir / "missing.txt").string()};
  EXPECT_THROW(prepare_dataset(options), InputError);
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  options.inputs = {kFixture};
  options.output_dir = file + "/sub";  // below a regular file: never creatable, even as root
  EXPECT_THROW(prepare_dataset(options), InputError);
  options.output_dir = (dir / "out").string();
  options.val_fraction = 1.5;
  EXPECT_THROW(prepare_dataset(options), InputError);
}

}  // namespace
}  // namespace chimera::data
