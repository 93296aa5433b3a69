#pragma once
// HDF5 token datasets (shared/DESIGN.md §5): `/tokens`, a 1-D chunked array of token ids (uint16
// when vocab_size <= 65536, else int32) with attributes `vocab_size`, `eos_token` and
// `tokenizer`. A dataset may be split over several files (shards); sample i of length T is
// tokens[i*T : i*T + T + 1] of one shard (inputs are the first T, targets the last T), and the
// samples of shard 0 come first, then those of shard 1, ... Readers read only the hyperslabs of
// the samples they need, and validate every token they read.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chimera/h5/handle.hpp"

namespace chimera::data {

inline constexpr const char* kTokensDataset = "tokens";
inline constexpr const char* kVocabSizeAttribute = "vocab_size";
inline constexpr const char* kEosTokenAttribute = "eos_token";
inline constexpr const char* kTokenizerAttribute = "tokenizer";
inline constexpr std::int64_t kMaxUint16Vocab = 65536;

struct DatasetShard {
  std::string path;
  std::int64_t tokens = 0;
  std::string dtype;              // "uint16" or "int32"
  std::int64_t chunk_tokens = 0;  // 0 when the dataset is not chunked
  h5::Handle file;
  h5::Handle dataset;
};

class TokenDataset {
 public:
  // Opens and validates every shard: `/tokens` present, 1-D, uint16 or int32 (wide enough for
  // vocab_size), attributes present and consistent across shards, 0 <= eos_token < vocab_size.
  // Every problem is an InputError naming the file.
  static TokenDataset open(const std::vector<std::string>& paths);

  int vocab_size() const { return vocab_size_; }
  std::int32_t eos_token() const { return eos_token_; }
  const std::string& tokenizer() const { return tokenizer_; }
  const std::vector<DatasetShard>& shards() const { return shards_; }
  std::int64_t num_tokens() const;
  // Samples of length `seq_len` over all shards: sum of (tokens - 1) / seq_len.
  std::int64_t num_samples(int seq_len) const;

  // Reads tokens [offset, offset + out.size()) of one shard. InputError naming the file when the
  // range is outside the shard, the read fails (a damaged file), or a token is >= vocab_size.
  void read_tokens(std::size_t shard, std::int64_t offset, std::span<std::int32_t> out) const;
  // Reads the seq_len + 1 tokens of sample `sample` (global index over all shards).
  void read_sample(std::int64_t sample, int seq_len, std::span<std::int32_t> out) const;

  // InputError unless the dataset has at least `needed` samples of length `seq_len`; `what` says
  // what needs them, e.g. "one global batch (W*N*B = 2*4*8)".
  void require_samples(std::int64_t needed, int seq_len, const std::string& what) const;

  // "data/austen/train.h5" or "3 shards (a.h5, ...)": names the dataset in messages.
  std::string describe() const;

 private:
  std::vector<DatasetShard> shards_;
  int vocab_size_ = 0;
  std::int32_t eos_token_ = 0;
  std::string tokenizer_;
};

// The inputs and targets of a micro-batch of B samples: row b of `inputs` is the first T tokens
// of sample b, row b of `targets` the last T (row-major B x T).
struct TokenBatch {
  int batch = 0;
  int seq_len = 0;
  std::vector<std::int32_t> inputs;
  std::vector<std::int32_t> targets;
};

TokenBatch read_batch(const TokenDataset& dataset, std::span<const std::int64_t> samples,
                      int seq_len);

}  // namespace chimera::data
