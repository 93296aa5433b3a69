#pragma once
// Writes a token dataset file (the format of dataset.hpp) by appending tokens. The file is
// written under `<path>.tmp` and renamed to `path` by finish(), so an interrupted `chimera prep`
// never leaves a truncated dataset under the final name.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chimera/h5/handle.hpp"

namespace chimera::data {

class TokenDatasetWriter {
 public:
  static constexpr std::int64_t kDefaultChunkTokens = std::int64_t{1} << 16;

  TokenDatasetWriter(std::string path, int vocab_size, std::int32_t eos_token,
                     const std::string& tokenizer, std::int64_t chunk_tokens = kDefaultChunkTokens);
  TokenDatasetWriter(const TokenDatasetWriter&) = delete;
  TokenDatasetWriter& operator=(const TokenDatasetWriter&) = delete;
  ~TokenDatasetWriter();  // without finish(): the temporary file is removed

  // Appends tokens; each must be in [0, vocab_size) (CHIMERA_CHECK: they come from a tokenizer).
  void append(std::span<const std::int32_t> tokens);
  std::int64_t size() const { return written_ + static_cast<std::int64_t>(pending_.size()); }
  // Writes what is pending, closes, and renames the file to its final name.
  void finish();

 private:
  void flush();

  std::string path_;
  std::string temp_path_;
  int vocab_size_;
  h5::Handle file_;
  h5::Handle dataset_;
  hid_t file_type_;
  std::vector<std::int32_t> pending_;
  std::int64_t written_ = 0;
  bool finished_ = false;
};

}  // namespace chimera::data
