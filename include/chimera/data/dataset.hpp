#pragma once
// HDF5 token datasets (docs/DESIGN.md §5): `/tokens`, a 1-D array of token ids of an integer
// type (`chimera prep` writes uint16 when vocab_size <= 65536, else int32, chunked), with the
// optional attributes `vocab_size`, `eos_token` and `tokenizer` (docs/data.md says in which
// forms). The one reader of such files: `train`, the evaluator and `inspect` all open them here.
// A dataset may be split over several files (shards); sample i of length T is
// tokens[i*T : i*T + T + 1] of one shard (inputs are the first T, targets the last T), and the
// samples of shard 0 come first, then those of shard 1, ... Readers read only the hyperslabs of
// the samples they need, and validate every token they read.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chimera/h5/handle.hpp"

namespace chimera::data {

inline constexpr const char* kTokensDataset = "tokens";
inline constexpr const char* kVocabSizeAttribute = "vocab_size";
inline constexpr const char* kEosTokenAttribute = "eos_token";
inline constexpr const char* kTokenizerAttribute = "tokenizer";
inline constexpr std::int64_t kMaxUint16Vocab = 65536;  // `chimera prep` writes uint16 up to this

struct DatasetShard {
  std::string path;
  std::int64_t tokens = 0;
  std::string dtype;              // "uint16", "int32", "uint32", "int64", ... (any integer type)
  bool is_signed = false;         // read through int64 if signed, uint64 if not
  std::int64_t chunk_tokens = 0;  // 0 when the dataset is not chunked
  h5::Handle file;
  h5::Handle dataset;
};

// A token as a reader reports it: its value and its offset in its shard's /tokens.
struct TokenAt {
  std::int64_t token = 0;
  std::int64_t offset = 0;
};

class TokenDataset {
 public:
  // Opens and validates every shard (each entry a file or a glob pattern, shard_paths.hpp):
  // `/tokens` present, 1-D, of an integer type of 8 to 64 bits; the optional attributes readable
  // and the same in every shard (present in all or none), and 0 <= eos_token < vocab_size where
  // given. Every problem is an InputError naming the file. Every token read must be in [0,
  // vocabulary): the model's vocab_size for training and evaluation (whatever vocab_size the file
  // declares); with vocabulary = 0 (inspect), any non-negative int32.
  static TokenDataset open(const std::vector<std::string>& entries, std::int64_t vocabulary = 0);

  // The attributes as the files declare them; nullopt when absent.
  std::optional<std::int64_t> vocab_size() const { return vocab_size_; }
  std::optional<std::int64_t> eos_token() const { return eos_token_; }
  const std::optional<std::string>& tokenizer() const { return tokenizer_; }
  const std::vector<DatasetShard>& shards() const { return shards_; }
  std::int64_t num_tokens() const;
  // Samples of length `seq_len` over all shards: sum of (tokens - 1) / seq_len.
  std::int64_t num_samples(int seq_len) const;

  // Reads tokens [offset, offset + out.size()) of one shard. InputError naming the file when the
  // range is outside the shard, the read fails (a damaged file), or a token is outside
  // [0, vocabulary), naming the token and its offset.
  void read_tokens(std::size_t shard, std::int64_t offset, std::span<std::int32_t> out) const;
  // Reads the seq_len + 1 tokens of sample `sample` (global index over all shards).
  void read_sample(std::int64_t sample, int seq_len, std::span<std::int32_t> out) const;
  // The largest token of one shard and its first offset (reads the whole shard, in blocks).
  TokenAt max_token(std::size_t shard) const;

  // InputError unless the dataset has at least `needed` samples of length `seq_len`; `what` says
  // what needs them, e.g. "one global batch (W*N*B = 2*4*8)".
  void require_samples(std::int64_t needed, int seq_len, const std::string& what) const;

  // "data/austen/train.h5" or "3 shards (a.h5, ...)": names the dataset in messages.
  std::string describe() const;

 private:
  std::vector<DatasetShard> shards_;
  std::optional<std::int64_t> vocab_size_;
  std::optional<std::int64_t> eos_token_;
  std::optional<std::string> tokenizer_;
  std::int64_t token_limit_ = 0;  // tokens must be below this
  std::string limit_name_;        // what the limit is, for messages: "model.vocab_size = 50257"
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
