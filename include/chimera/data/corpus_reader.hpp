#pragma once
// Cuts a corpus (a list of files, plain / .gz / .zst) into ordered pieces of about `piece_bytes`
// that can be tokenized independently, in parallel, and still give the ids of the whole:
// - text files: cut just after a '\n' between two printable ASCII characters (safe_split_point);
// - JSON lines: cut after a '\n', so that every piece holds whole lines.
// The cuts depend only on the input and piece_bytes, never on the thread count. A piece knows
// where it starts (file, byte offset, line), so that errors can name the line and a resumed
// run can start reading there.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chimera/data/input_file.hpp"

namespace chimera::data {

enum class InputFormat { Text, JsonLines };

// A place in the corpus: the byte offset (uncompressed) in input file `file`, on line `line`
// (1-based). Only the starts of pieces are used as positions.
struct InputPosition {
  std::size_t file = 0;
  std::uint64_t offset = 0;
  std::uint64_t line = 1;
};

struct CorpusPiece {
  InputPosition start;
  std::string text;
  bool starts_file = false;     // the piece begins its file (a text file's document begins)
  std::uint64_t disk_done = 0;  // input bytes on disk consumed once this piece was read
};

class CorpusReader {
 public:
  // Starts at `from` (the start of the corpus, or a resume point: a piece start of an earlier
  // run with the same inputs). InputError for an input file that is empty.
  CorpusReader(std::vector<std::string> inputs, InputFormat format, std::size_t piece_bytes,
               InputPosition from = {});
  ~CorpusReader();
  // The next piece in corpus order; false at the end.
  bool next(CorpusPiece& piece);

 private:
  bool open_next_file();
  std::vector<std::string> inputs_;
  InputFormat format_;
  std::size_t piece_bytes_;
  InputPosition at_;            // where the next piece starts
  bool file_open_ = false;      // at_.file is open in file_
  bool at_file_start_ = false;  // the next piece is the first of its file
  std::unique_ptr<InputFile> file_;
  std::string buffer_;  // read but not yet handed out; starts at at_
  bool file_more_ = false;
  std::uint64_t disk_before_ = 0;  // disk bytes of the files before at_.file
};

}  // namespace chimera::data
