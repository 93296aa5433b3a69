// Token datasets: writer -> reader round trip, shards, and every kind of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/data/dataset_writer.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "input_error.hpp"

namespace chimera::data {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_dataset_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write_dataset(const std::string& name, const std::vector<std::int32_t>& tokens,
                          int vocab = 50257, std::int64_t chunk = 16) {
  const std::string path = temp_path(name);
  TokenDatasetWriter writer(path, vocab, vocab - 1, "gpt2", chunk);
  writer.append(tokens);
  writer.finish();
  return path;
}

std::vector<std::int32_t> iota_tokens(int n, int modulo = 50000) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (i * 7) % modulo;
  return t;
}

// A file with /tokens of an arbitrary type and shape, and the usual attributes unless told.
std::string write_raw(const std::string& name, hid_t type, std::vector<hsize_t> dims,
                      const void* data, bool attributes = true, std::int64_t vocab = 50257) {
  const std::string path = temp_path(name);
  h5::Handle file = h5::create_file(path);
  h5::Handle space =
      h5::dataspace_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  h5::Handle dataset = h5::dataset_handle(
      H5Dcreate2(file.get(), "tokens", type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (data != nullptr) H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  if (attributes) {
    h5::write_int_attribute(file.get(), "vocab_size", vocab);
    h5::write_int_attribute(file.get(), "eos_token", 0);
    h5::write_string_attribute(file.get(), "tokenizer", "gpt2");
  }
  return path;
}

using chimera::testing::input_error;

TEST(TokenDataset, RoundTripReadsSamplesAndBatches) {
  const auto tokens = iota_tokens(1001);
  const std::string path = write_dataset("roundtrip.h5", tokens);
  const TokenDataset ds = TokenDataset::open({path});
  EXPECT_EQ(ds.vocab_size(), 50257);
  EXPECT_EQ(ds.eos_token(), 50256);
  EXPECT_EQ(ds.tokenizer(), std::optional<std::string>("gpt2"));
  EXPECT_EQ(ds.num_tokens(), 1001);
  EXPECT_EQ(ds.shards()[0].dtype, "uint16");
  EXPECT_EQ(ds.shards()[0].chunk_tokens, 16);
  EXPECT_EQ(ds.num_samples(10), 100);  // (1001 - 1) / 10
  EXPECT_EQ(ds.num_samples(7), 142);
  std::vector<std::int32_t> sample(11);
  ds.read_sample(42, 10, sample);
  EXPECT_TRUE(std::equal(sample.begin(), sample.end(), tokens.begin() + 420));

  const std::vector<std::int64_t> samples{3, 0, 99};
  const TokenBatch batch = read_batch(ds, samples, 10);
  ASSERT_EQ(batch.inputs.size(), 30u);
  for (std::size_t b = 0; b < samples.size(); ++b)
    for (std::size_t t = 0; t < 10; ++t) {
      const auto at = static_cast<std::size_t>(samples[b]) * 10 + t;
      EXPECT_EQ(batch.inputs[b * 10 + t], tokens[at]);
      EXPECT_EQ(batch.targets[b * 10 + t], tokens[at + 1]);
    }
}

TEST(TokenDataset, ShardsAreConcatenatedSampleWise) {
  const auto a = iota_tokens(25), b = iota_tokens(31, 999);
  const TokenDataset ds =
      TokenDataset::open({write_dataset("shard_a.h5", a), write_dataset("shard_b.h5", b)});
  EXPECT_EQ(ds.num_samples(4), 6 + 7);
  std::vector<std::int32_t> sample(5);
  ds.read_sample(5, 4, sample);  // last of shard a
  EXPECT_TRUE(std::equal(sample.begin(), sample.end(), a.begin() + 20));
  ds.read_sample(6, 4, sample);  // first of shard b
  EXPECT_TRUE(std::equal(sample.begin(), sample.end(), b.begin()));
}

TEST(TokenDataset, LargeVocabulariesUseInt32) {
  const std::vector<std::int32_t> tokens{0, 70000, 99999, 5};
  const TokenDataset ds = TokenDataset::open({write_dataset("wide.h5", tokens, 100000)});
  EXPECT_EQ(ds.shards()[0].dtype, "int32");
  std::vector<std::int32_t> out(4);
  ds.read_tokens(0, 0, out);
  EXPECT_EQ(out, tokens);
}

TEST(TokenDataset, BadInputsAreClearInputErrors) {
  EXPECT_NE(input_error([] { TokenDataset::open({temp_path("missing.h5")}); }).find("no such file"),
            std::string::npos);
  const std::string text = temp_path("text.h5");
  std::ofstream(text) << "hello";
  EXPECT_NE(input_error([&] { TokenDataset::open({text}); }).find("not an HDF5 file"),
            std::string::npos);

  const std::string empty = temp_path("no_tokens.h5");
  { h5::Handle file = h5::create_file(empty); }
  EXPECT_NE(input_error([&] { TokenDataset::open({empty}); }).find("has no /tokens"),
            std::string::npos);

  const std::vector<float> floats(10, 1.0f);
  const auto wrong_dtype = input_error(
      [&] { TokenDataset::open({write_raw("float.h5", H5T_NATIVE_FLOAT, {10}, floats.data())}); });
  EXPECT_NE(wrong_dtype.find("dtype float32"), std::string::npos) << wrong_dtype;

  const std::vector<std::uint16_t> grid(12, 1);
  const auto two_d = input_error([&] {
    TokenDataset::open({write_raw("grid.h5", H5T_NATIVE_UINT16, {3, 4}, grid.data())});
  });
  EXPECT_NE(two_d.find("[3, 4]"), std::string::npos) << two_d;

  // The attributes are optional; a uint16 file may declare a vocabulary wider than uint16.
  const TokenDataset bare =
      TokenDataset::open({write_raw("bare.h5", H5T_NATIVE_UINT16, {12}, grid.data(), false)});
  EXPECT_FALSE(bare.vocab_size() || bare.eos_token() || bare.tokenizer());
  TokenDataset::open({write_raw("narrow.h5", H5T_NATIVE_UINT16, {12}, grid.data(), true, 100000)});

  // Tokens beyond the model's vocabulary are found when read, whatever the file declares.
  const std::vector<std::uint16_t> big{1, 2, 60000, 3};
  const std::string big_path = write_raw("big_token.h5", H5T_NATIVE_UINT16, {4}, big.data());
  const TokenDataset ds = TokenDataset::open({big_path}, 50257);
  std::vector<std::int32_t> out(4);
  const auto beyond = input_error([&] { ds.read_tokens(0, 0, out); });
  EXPECT_NE(beyond.find("token 60000 at offset 2"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("model.vocab_size = 50257"), std::string::npos) << beyond;
  TokenDataset::open({big_path}, 60001).read_tokens(0, 0, out);
  EXPECT_EQ(out[2], 60000);
  const TokenAt max = TokenDataset::open({big_path}).max_token(0);
  EXPECT_EQ(max.token, 60000);
  EXPECT_EQ(max.offset, 2);

  const auto mismatch = input_error([&] {
    TokenDataset::open({write_dataset("v1.h5", iota_tokens(10)),
                        write_dataset("v2.h5", iota_tokens(10, 10), 20000)});
  });
  EXPECT_NE(mismatch.find("all shards"), std::string::npos) << mismatch;
}

TEST(TokenDataset, EveryIntegerWidthReadsExactly) {
  const std::vector<std::int64_t> values{0, 5, 127, 42};
  for (const hid_t type :
       {H5T_NATIVE_INT8, H5T_NATIVE_UINT8, H5T_NATIVE_INT16, H5T_NATIVE_UINT16, H5T_NATIVE_INT32,
        H5T_NATIVE_UINT32, H5T_NATIVE_INT64, H5T_NATIVE_UINT64}) {
    const std::string path = temp_path("width.h5");
    {
      h5::Handle file = h5::create_file(path);
      const hsize_t n = values.size();
      h5::Handle space = h5::dataspace_handle(H5Screate_simple(1, &n, nullptr));
      h5::Handle dataset = h5::dataset_handle(H5Dcreate2(file.get(), "tokens", type, space.get(),
                                                         H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      ASSERT_GE(
          H5Dwrite(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
          0);
    }
    std::vector<std::int32_t> out(values.size());
    TokenDataset::open({path}, 128).read_tokens(0, 0, out);
    EXPECT_EQ(std::vector<std::int64_t>(out.begin(), out.end()), values);
  }
  // Negative ids and ids beyond int32 are reported as they are, never clipped into range.
  const std::vector<std::int64_t> wild{3, -1, std::int64_t{1} << 40};
  const std::string path = write_raw("wild.h5", H5T_NATIVE_INT64, {3}, wild.data(), false);
  std::vector<std::int32_t> one(1);
  const auto negative = input_error([&] { TokenDataset::open({path}).read_tokens(0, 1, one); });
  EXPECT_NE(negative.find("token -1 at offset 1"), std::string::npos) << negative;
  const auto huge = input_error([&] { TokenDataset::open({path}).read_tokens(0, 2, one); });
  EXPECT_NE(huge.find("token 1099511627776 at offset 2"), std::string::npos) << huge;
}

TEST(TokenDataset, TooShortForOneGlobalBatch) {
  const TokenDataset ds = TokenDataset::open({write_dataset("short.h5", iota_tokens(100))});
  ds.require_samples(9, 11, "one global batch");
  const auto message = input_error([&] { ds.require_samples(10, 11, "one global batch"); });
  EXPECT_NE(message.find("9 samples of length 11"), std::string::npos) << message;
}

TEST(TokenDataset, TruncatedFileIsAnInputError) {
  const std::string whole = write_dataset("whole.h5", iota_tokens(200000), 50257, 4096);
  const std::string cut = temp_path("cut.h5");
  fs::copy_file(whole, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(whole) * 2 / 3);
  const auto message = input_error([&] {
    const TokenDataset ds = TokenDataset::open({cut});
    std::vector<std::int32_t> all(static_cast<std::size_t>(ds.num_tokens()));
    ds.read_tokens(0, 0, all);
  });
  EXPECT_NE(message.find(cut), std::string::npos) << message;
}

TEST(TokenDatasetWriter, UnfinishedWriterLeavesNoFile) {
  const std::string path = temp_path("unfinished.h5");
  {
    TokenDatasetWriter writer(path, 50257, 50256, "gpt2");
    writer.append(iota_tokens(100));
    EXPECT_TRUE(fs::exists(path + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

}  // namespace
}  // namespace chimera::data
