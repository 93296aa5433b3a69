#pragma once
// Turns one piece of the corpus (corpus_reader.hpp) into GPT-2 token ids: the work that
// `chimera prep` spreads over threads. Pure given the piece: the ids depend on nothing else, so
// the output is the same at any thread count.
// - Text: a document starts where its file starts (an end-of-text token), and a literal
//   "<|endoftext|>" inside the text ends one.
// - JSON lines: every line is a JSON object whose string under `jsonl_key` is a document: an
//   end-of-text token, then the string's ids as plain text (a literal "<|endoftext|>" in it is
//   text, as in GPT-2's encoder.py and llm.c's fineweb.py). Blank lines are ignored.
#include <cstdint>
#include <string>
#include <vector>

#include "chimera/data/corpus_reader.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/data/utf8.hpp"

namespace chimera::data {

struct PieceEncoding {
  InputFormat format = InputFormat::Text;
  std::string jsonl_key = "text";
  InvalidUtf8 invalid_utf8 = InvalidUtf8::Error;
  bool skip_bad_lines = false;  // JSON lines: skip (and count) malformed lines instead of failing
};

struct EncodedPiece {
  std::vector<std::int32_t> tokens;
  std::int64_t documents = 0;
  std::int64_t bad_lines = 0;  // skipped under skip_bad_lines
  std::string first_bad_line;  // "FILE: line N: why" of the first one skipped
};

// InputError naming the file, line and byte offset for invalid UTF-8 (InvalidUtf8::Error) and,
// without skip_bad_lines, the file and line of a malformed JSON line.
EncodedPiece encode_piece(const Tokenizer& tokenizer, const CorpusPiece& piece,
                          const std::string& path, const PieceEncoding& encoding);

}  // namespace chimera::data
