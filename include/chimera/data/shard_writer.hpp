#pragma once
// One split (train or val) of `chimera prep`'s output: either one file `<stem>.h5`, or shards
// `<stem>-00000.h5`, `<stem>-00001.h5`, ... of at most `shard_tokens` tokens each, cut at exactly
// that count so that the shards, read in name order, are the unsharded token stream. Each shard is
// a TokenDatasetWriter (written under a temporary name, renamed when complete).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chimera/data/dataset_writer.hpp"

namespace chimera::data {

struct DatasetLabels {
  int vocab_size = 0;
  std::int32_t eos_token = 0;
  std::string tokenizer;
};

// "<dir>/<stem>-00042.h5".
std::string shard_path(const std::string& dir, const std::string& stem, int index);

// A file name of prep's output: "train.h5" / "val.h5" (number -1) or "train-00042.h5" /
// "val-00042.h5" (five or more digits); nullopt for any other name.
struct ShardName {
  std::string stem;  // "train" or "val"
  long number = -1;
};
std::optional<ShardName> parse_shard_name(std::string_view filename);

class ShardWriter {
 public:
  // shard_tokens = 0: one file <stem>.h5. To resume, `complete_shards` shards are already on disk
  // and `routed` tokens of this split were produced before the resume point: tokens up to
  // complete_shards * shard_tokens are dropped (they are in those shards), the rest written. The
  // first file is created at once, so that an unwritable directory is reported before any work.
  ShardWriter(std::string dir, std::string stem, std::int64_t shard_tokens, DatasetLabels labels,
              int complete_shards = 0, std::int64_t routed = 0);

  void append(std::span<const std::int32_t> tokens);
  // Tokens of this split produced so far (including those in complete shards).
  std::int64_t routed() const { return routed_; }
  // Shards written and renamed to their final names.
  int complete_shards() const { return complete_; }
  // Finishes the open shard. A split that received no token at all still gets one (empty) file,
  // so that every split of a prep run exists on disk.
  void finish();
  // The final paths of all shards, in order (complete once finish() returned).
  std::vector<std::string> paths() const;

 private:
  void open_next();
  std::string dir_, stem_;
  std::int64_t shard_tokens_;
  DatasetLabels labels_;
  int complete_;
  std::int64_t routed_;
  std::int64_t skip_until_;  // tokens below this index are already on disk
  std::optional<TokenDatasetWriter> open_;
};

}  // namespace chimera::data
