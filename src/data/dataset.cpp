#include "chimera/data/dataset.hpp"

#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/data/shard_paths.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/h5/stored_data.hpp"

namespace chimera::data {

namespace {

constexpr const char* kWhat = "token dataset (HDF5 with /tokens, see `chimera prep`)";
// Tokens are held as int32, so no vocabulary reaches beyond this.
constexpr std::int64_t kMaxTokenLimit = std::int64_t{INT32_MAX};

DatasetShard open_shard(const std::string& path) {
  DatasetShard shard;
  shard.path = path;
  shard.file = h5::open_file_read(path, kWhat);
  CHIMERA_REQUIRE(
      h5::has_link(shard.file.get(), kTokensDataset),
      "{}: has no /{} dataset (expected a token dataset: /tokens, 1-D integer token ids)", path,
      kTokensDataset);
  shard.dataset = h5::dataset_handle(H5Dopen2(shard.file.get(), kTokensDataset, H5P_DEFAULT));
  CHIMERA_REQUIRE(shard.dataset.valid(), "{}: /{} is not a dataset that can be opened (HDF5: {})",
                  path, kTokensDataset, h5::library_error_message());
  const auto shape = h5::dataset_shape(shard.dataset.get());
  CHIMERA_REQUIRE(shape.size() == 1, "{}: /{} has shape {}, expected a 1-D array of tokens", path,
                  kTokensDataset, h5::format_shape(shape));
  shard.tokens = shape[0];
  CHIMERA_REQUIRE(shard.tokens >= 0,
                  "{}: /{} claims more tokens than any file holds; the file is "
                  "damaged",
                  path, kTokensDataset);

  h5::Handle type = h5::datatype_handle(H5Dget_type(shard.dataset.get()));
  CHIMERA_REQUIRE(type.valid(), "{}: /{} has an unreadable type", path, kTokensDataset);
  shard.dtype = h5::describe_type(type.get());
  // Any integer of 8 to 64 bits reads exactly through a 64-bit integer of its sign.
  const std::size_t bytes = H5Tget_size(type.get());
  CHIMERA_REQUIRE(H5Tget_class(type.get()) == H5T_INTEGER && bytes >= 1 && bytes <= 8,
                  "{}: /{} has dtype {}, expected integer token ids: uint16, int32, uint32 or "
                  "int64 (in h5py: create_dataset(\"tokens\", data=numpy.asarray(ids, "
                  "dtype=numpy.uint16)))",
                  path, kTokensDataset, shard.dtype);
  shard.is_signed = H5Tget_sign(type.get()) != H5T_SGN_NONE;
  // Refused here, at setup on every rank, rather than when a sample is read: a filter this HDF5
  // cannot decode, or values that were never written (they would read as zeros).
  if (const auto problem = h5::stored_data_problem(shard.dataset.get()))
    throw InputError(fmt::format("{}: dataset '{}' {}", path, kTokensDataset, *problem));

  h5::Handle create = h5::plist_handle(H5Dget_create_plist(shard.dataset.get()));
  if (create.valid() && H5Pget_layout(create.get()) == H5D_CHUNKED) {
    hsize_t chunk = 0;
    if (H5Pget_chunk(create.get(), 1, &chunk) == 1)
      shard.chunk_tokens = static_cast<std::int64_t>(chunk);
  }
  return shard;
}

template <typename T>
std::string or_absent(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : "absent";
}

}  // namespace

TokenDataset TokenDataset::open(const std::vector<std::string>& entries, std::int64_t vocabulary) {
  CHIMERA_REQUIRE(!entries.empty(),
                  "no token dataset files given (expected one or more .h5 shards)");
  const std::vector<std::string> paths = expand_shard_paths(entries);
  CHIMERA_CHECK(vocabulary >= 0 && vocabulary <= kMaxTokenLimit, "vocabulary {}", vocabulary);
  TokenDataset ds;
  ds.token_limit_ = vocabulary > 0 ? vocabulary : kMaxTokenLimit;
  ds.limit_name_ = vocabulary > 0 ? fmt::format("model.vocab_size = {}", vocabulary)
                                  : fmt::format("{}", kMaxTokenLimit);
  for (const std::string& path : paths) {
    DatasetShard shard = open_shard(path);
    const hid_t root = shard.file.get();
    const std::string context = path + ": /";
    const auto vocab = h5::read_optional_int_attribute(root, kVocabSizeAttribute, context);
    const auto eos = h5::read_optional_int_attribute(root, kEosTokenAttribute, context);
    const auto tokenizer = h5::read_optional_string_attribute(root, kTokenizerAttribute, context);
    CHIMERA_REQUIRE(!vocab || (*vocab > 0 && *vocab <= kMaxTokenLimit),
                    "{}: vocab_size = {}, expected a positive 32-bit count", path, *vocab);
    CHIMERA_REQUIRE(!eos || (*eos >= 0 && *eos < vocab.value_or(kMaxTokenLimit)),
                    "{}: eos_token = {} is outside [0, vocab_size = {})", path, *eos,
                    vocab.value_or(kMaxTokenLimit));
    if (ds.shards_.empty()) {
      ds.vocab_size_ = vocab;
      ds.eos_token_ = eos;
      ds.tokenizer_ = tokenizer;
    } else {
      const std::string& first = ds.shards_.front().path;
      CHIMERA_REQUIRE(vocab == ds.vocab_size_ && eos == ds.eos_token_ && tokenizer == ds.tokenizer_,
                      "{}: (vocab_size, eos_token, tokenizer) = ({}, {}, {}) differs from {}'s "
                      "({}, {}, {}); all shards of a dataset must share one tokenizer",
                      path, or_absent(vocab), or_absent(eos), or_absent(tokenizer), first,
                      or_absent(ds.vocab_size_), or_absent(ds.eos_token_),
                      or_absent(ds.tokenizer_));
    }
    ds.shards_.push_back(std::move(shard));
  }
  return ds;
}

std::int64_t TokenDataset::num_tokens() const {
  std::int64_t total = 0;
  for (const auto& shard : shards_) total += shard.tokens;
  return total;
}

std::int64_t TokenDataset::num_samples(int seq_len) const {
  CHIMERA_REQUIRE(seq_len > 0, "sequence length {} must be positive", seq_len);
  std::int64_t total = 0;
  for (const auto& shard : shards_)
    if (shard.tokens > 1) total += (shard.tokens - 1) / seq_len;
  return total;
}

void TokenDataset::read_tokens(std::size_t shard_index, std::int64_t offset,
                               std::span<std::int32_t> out) const {
  CHIMERA_CHECK(shard_index < shards_.size(), "shard {} of {}", shard_index, shards_.size());
  const DatasetShard& shard = shards_[shard_index];
  const auto count = static_cast<std::int64_t>(out.size());
  CHIMERA_REQUIRE(offset >= 0 && offset + count <= shard.tokens,
                  "{}: tokens [{}, {}) are outside the {} tokens of /{}", shard.path, offset,
                  offset + count, shard.tokens, kTokensDataset);
  if (count == 0) return;
  h5::Handle file_space = h5::dataspace_handle(H5_CHECK(H5Dget_space(shard.dataset.get())));
  const hsize_t start = static_cast<hsize_t>(offset), length = static_cast<hsize_t>(count);
  H5_CHECK(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &length, nullptr));
  h5::Handle memory_space = h5::dataspace_handle(H5_CHECK(H5Screate_simple(1, &length, nullptr)));
  // Read at full width and checked before narrowing: a token that does not fit int32 is
  // reported as it is, never clipped or wrapped into the vocabulary.
  std::vector<std::int64_t> wide(out.size());
  CHIMERA_REQUIRE(
      H5Dread(shard.dataset.get(), shard.is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64,
              memory_space.get(), file_space.get(), H5P_DEFAULT, wide.data()) >= 0,
      "{}: reading tokens [{}, {}) failed: the file is damaged or truncated (HDF5: {})", shard.path,
      offset, offset + count, h5::library_error_message());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    const std::int64_t token = wide[i];
    const bool in_range = shard.is_signed ? token >= 0 && token < token_limit_
                                          : static_cast<std::uint64_t>(token) <
                                                static_cast<std::uint64_t>(token_limit_);
    if (!in_range) {
      const std::string shown = shard.is_signed ? std::to_string(token)
                                                : std::to_string(static_cast<std::uint64_t>(token));
      throw InputError(fmt::format("{}: token {} at offset {} of /{} is outside [0, {})",
                                   shard.path, shown, offset + static_cast<std::int64_t>(i),
                                   kTokensDataset, limit_name_));
    }
    out[i] = static_cast<std::int32_t>(token);
  }
}

TokenAt TokenDataset::max_token(std::size_t shard) const {
  CHIMERA_CHECK(shard < shards_.size(), "shard {} of {}", shard, shards_.size());
  constexpr std::int64_t kBlock = std::int64_t{1} << 20;
  TokenAt max{-1, -1};
  std::vector<std::int32_t> block;
  const std::int64_t n = shards_[shard].tokens;
  for (std::int64_t at = 0; at < n; at += kBlock) {
    block.resize(static_cast<std::size_t>(std::min(kBlock, n - at)));
    read_tokens(shard, at, block);
    const auto it = std::max_element(block.begin(), block.end());
    if (*it > max.token) max = {*it, at + (it - block.begin())};
  }
  return max;
}

void TokenDataset::read_sample(std::int64_t sample, int seq_len,
                               std::span<std::int32_t> out) const {
  CHIMERA_CHECK(out.size() == static_cast<std::size_t>(seq_len) + 1, "sample buffer of {} for T={}",
                out.size(), seq_len);
  CHIMERA_CHECK(sample >= 0, "negative sample index {}", sample);
  std::int64_t local = sample;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    const std::int64_t in_shard = shards_[s].tokens > 1 ? (shards_[s].tokens - 1) / seq_len : 0;
    if (local < in_shard) {
      read_tokens(s, local * seq_len, out);
      return;
    }
    local -= in_shard;
  }
  CHIMERA_CHECK(false, "sample {} is beyond the {} samples of {}", sample, num_samples(seq_len),
                describe());
}

void TokenDataset::require_samples(std::int64_t needed, int seq_len,
                                   const std::string& what) const {
  const std::int64_t have = num_samples(seq_len);
  CHIMERA_REQUIRE(have >= needed,
                  "{} has {} tokens = {} samples of length {}, but {} needs {}: use more data, a "
                  "shorter seq_len, or a smaller batch",
                  describe(), num_tokens(), have, seq_len, what, needed);
}

std::string TokenDataset::describe() const {
  if (shards_.size() == 1) return shards_.front().path;
  return fmt::format("{} shards ({}, ...)", shards_.size(), shards_.front().path);
}

TokenBatch read_batch(const TokenDataset& dataset, std::span<const std::int64_t> samples,
                      int seq_len) {
  TokenBatch batch;
  batch.batch = static_cast<int>(samples.size());
  batch.seq_len = seq_len;
  const auto T = static_cast<std::size_t>(seq_len);
  batch.inputs.resize(samples.size() * T);
  batch.targets.resize(samples.size() * T);
  std::vector<std::int32_t> sample(T + 1);
  for (std::size_t b = 0; b < samples.size(); ++b) {
    dataset.read_sample(samples[b], seq_len, sample);
    std::copy(sample.begin(), sample.end() - 1,
              batch.inputs.begin() + static_cast<std::ptrdiff_t>(b * T));
    std::copy(sample.begin() + 1, sample.end(),
              batch.targets.begin() + static_cast<std::ptrdiff_t>(b * T));
  }
  return batch;
}

}  // namespace chimera::data
