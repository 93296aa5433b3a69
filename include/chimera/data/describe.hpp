#pragma once
// What `chimera inspect` prints about a token dataset: size, dtype, vocabulary, samples per
// sequence length, and a decoded snippet (with GPT-2's tokenizer when it is at hand).
#include <cstdint>
#include <string>

namespace chimera::data {

struct DatasetDescribeOptions {
  std::string tokenizer_dir;  // "" or unloadable: show ids only
  int seq_len = 0;            // 0: samples for T = 64 ... 1024
  std::int64_t offset = 0;    // first token of the snippet
  std::int64_t tokens = 64;   // snippet length
};
std::string describe_dataset(const std::string& path, const DatasetDescribeOptions& options);

// A directory that `chimera prep` wrote: its splits (train.h5 / val.h5, or shards
// train-00000.h5, ...), each with its shard count, tokens, samples per sequence length, missing
// shard numbers, and whether a sharded prep finished (prep-state.json). Reads metadata only.
std::string describe_dataset_directory(const std::string& dir,
                                       const DatasetDescribeOptions& options);

// The whole file decoded back to text (for the prep -> inspect round trip).
std::string decode_dataset(const std::string& path, const std::string& tokenizer_dir);

}  // namespace chimera::data
