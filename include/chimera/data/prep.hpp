#pragma once
// `chimera prep` as a library function: a corpus -> GPT-2 tokens -> HDF5 token datasets.
//
// Input (corpus_reader.hpp, piece_encoder.hpp): text files, each file one document (a literal
// "<|endoftext|>" inside a file also separates documents), or JSON lines, one document per line
// under a key; plain, .gz or .zst. Each document is preceded by the end-of-text token (GPT-2's
// convention). The corpus is cut into pieces of about piece_bytes, which `threads` threads
// tokenize while the calling thread reads ahead and writes results in corpus order; at most a
// window of pieces is in flight, so memory does not grow with the corpus. The output is the same,
// byte for byte, at any thread count.
//
// Train/validation split: the token stream is cut into blocks of `split_block` tokens, and the
// last val_fraction of every block goes to the validation split, so that validation text comes
// from all over the corpus rather than from its last document. Where a split resumes after a
// gap, an end-of-text token marks the discontinuity.
//
// Output: <output>/train.h5 and val.h5, or with shard_tokens = K shards train-00000.h5, ... and
// val-00000.h5, ... of at most K tokens each (shard_writer.hpp), plus prep-state.json, from which
// `resume` continues an interrupted run (prep_state.hpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chimera/data/corpus_reader.hpp"
#include "chimera/data/input_file.hpp"
#include "chimera/data/utf8.hpp"

namespace chimera::data {

struct PrepProgress {
  std::uint64_t text_bytes = 0;  // uncompressed input (text or JSON lines) read by this run
  std::uint64_t disk_bytes = 0;  // input bytes on disk consumed so far (compressed for .gz/.zst)
  std::uint64_t disk_total = 0;  // size on disk of all input files
  std::int64_t documents = 0;    // documents so far (of earlier runs too, when resumed)
  std::int64_t tokens = 0;       // tokens written so far (train + val)
  double seconds = 0;            // since this run started
};

struct PrepOptions {
  std::string tokenizer_dir;
  std::string output_dir;
  std::vector<std::string> inputs;
  // Empty: text files. Otherwise JSON lines, the document under this key.
  std::string jsonl_key;
  bool skip_bad_lines = false;
  double val_fraction = 0.05;
  std::int64_t split_block = 65536;
  InvalidUtf8 invalid_utf8 = InvalidUtf8::Error;
  int threads = 1;
  std::int64_t shard_tokens = 0;  // 0: one file per split
  bool resume = false;
  // The corpus is tokenized in pieces of about this many bytes.
  std::size_t piece_bytes = std::size_t{1} << 20;
  // Called after every piece is written, on the calling thread.
  std::function<void(const PrepProgress&)> on_progress;
};

struct PrepResult {
  std::vector<std::string> train_paths;
  std::vector<std::string> val_paths;  // empty when val_fraction == 0
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  std::int64_t documents = 0;     // of earlier runs too, when resumed
  std::int64_t bad_lines = 0;     // skipped under skip_bad_lines
  std::string first_bad_line;     // the first of them, "FILE: line N: why" (this run)
  std::uint64_t text_bytes = 0;   // uncompressed input (text or JSON lines) read by this run
  bool resumed = false;           // continued an interrupted run
  bool already_finished = false;  // resume found the run complete; nothing was done
  double seconds = 0;
};

// InputError for a missing or empty input, invalid UTF-8 (with InvalidUtf8::Error: the file,
// line and byte offset), a malformed JSON line (file and line), an empty corpus, bad options,
// an output that cannot be written (the final names never hold a partial file), or a resume
// whose settings differ from the interrupted run's.
PrepResult prepare_dataset(const PrepOptions& options);

}  // namespace chimera::data
