#pragma once
// `chimera prep` as a library function: text files -> GPT-2 tokens -> HDF5 token datasets.
//
// Every input file is one document, and a literal "<|endoftext|>" inside a file also separates
// documents; each document is preceded by the end-of-text token (GPT-2's convention). Files are
// streamed in bounded pieces (cut where the tokenization cannot change, see safe_split_point);
// files ending in .gz are decompressed on the fly.
//
// Train/validation split: the token stream is cut into blocks of `split_block` tokens, and the
// last val_fraction of every block goes to the validation split, so that validation text comes
// from all over the corpus rather than from its last document. Where a split resumes after a
// gap, an end-of-text token marks the discontinuity.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chimera/data/utf8.hpp"

namespace chimera::data {

struct PrepProgress {
  std::uint64_t text_bytes = 0;  // uncompressed text tokenized so far
  std::uint64_t disk_bytes = 0;  // input file bytes read so far (compressed for .gz)
  std::uint64_t disk_total = 0;  // size of all input files
};

struct PrepOptions {
  std::string tokenizer_dir;
  std::string output_dir;
  std::vector<std::string> inputs;
  double val_fraction = 0.05;
  std::int64_t split_block = 65536;
  InvalidUtf8 invalid_utf8 = InvalidUtf8::Error;
  // Text is read and tokenized in pieces of about this many bytes (bounds memory).
  std::size_t piece_bytes = std::size_t{8} << 20;
  // Called after every piece of text (a few MB) is tokenized.
  std::function<void(const PrepProgress&)> on_progress;
};

struct PrepResult {
  std::string train_path;
  std::string val_path;  // "" when val_fraction == 0
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  std::int64_t documents = 0;
  std::uint64_t text_bytes = 0;  // uncompressed
  double seconds = 0;
};

// Writes <output_dir>/train.h5 (and val.h5), each via a temporary name. InputError for a missing
// input, invalid UTF-8 (with InvalidUtf8::Error: the file and byte offset), bad options, or an
// output directory that cannot be written.
PrepResult prepare_dataset(const PrepOptions& options);

// The whole content of a text file, plain or .gz (for tests and benchmarks; prep streams).
std::string read_text_file(const std::string& path);

}  // namespace chimera::data
