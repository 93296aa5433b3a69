#pragma once
// GPT-2's byte-level BPE, exactly: the GPT-2 pre-tokenization regex (PCRE2 with Unicode
// properties, JIT-compiled), the byte-to-unicode alphabet of encoder.json, and merges applied
// lowest rank first, with a cache of the words already seen. Ids equal those of GPT-2's
// encoder.py (and of tiktoken's "gpt2" encoding) on any valid UTF-8 text.
//
// Not thread-safe: encode() fills the word cache. Use one Tokenizer per thread (clone()).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace chimera::data {

// Tokens of GPT-2's vocabulary (encoder.json): a model with this vocabulary speaks GPT-2's BPE.
inline constexpr int kGpt2VocabSize = 50257;

class Tokenizer {
 public:
  // Loads `dir`/encoder.json and `dir`/vocab.bpe (GPT-2's files). InputError naming the file and
  // line for anything malformed.
  static Tokenizer load(const std::string& dir);

  // A tokenizer with the same vocabulary and merges and an empty word cache, for another thread
  // (much cheaper than loading the files again).
  Tokenizer clone() const;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of `text`, read as plain text: a literal "<|endoftext|>" is encoded as its
  // characters, like GPT-2's encoder.py. `text` must be valid UTF-8: otherwise InputError naming
  // the byte offset (add `offset_base` to report offsets within a larger file).
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const;
  void encode_ordinary(std::string_view text, std::vector<std::int32_t>& out) const;  // appends
  // Like encode_ordinary, but each literal "<|endoftext|>" becomes eos_token() (as Hugging Face's
  // GPT2Tokenizer and tiktoken with allowed_special do). Appends to `out`.
  void encode(std::string_view text, std::vector<std::int32_t>& out,
              std::size_t offset_base = 0) const;
  std::vector<std::int32_t> encode(std::string_view text) const;

  // The bytes the ids stand for (which may end inside a UTF-8 sequence if the ids were cut).
  // InputError for an id outside [0, vocab_size()).
  std::string decode(std::span<const std::int32_t> ids) const;
  std::string_view token_bytes(std::int32_t id) const;

  int vocab_size() const;
  std::int32_t eos_token() const;
  static constexpr std::string_view kEndOfText = "<|endoftext|>";

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where a long text may be cut so that encoding the pieces separately gives the same ids as
// encoding the whole: just after a '\n' that follows a non-space and precedes a non-space
// character (the regex never joins across such a point). Returns the largest such cut <= `limit`
// (0 when there is none), so that files can be encoded in bounded pieces.
std::size_t safe_split_point(std::string_view text, std::size_t limit);

}  // namespace chimera::data
