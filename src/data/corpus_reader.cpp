#include "chimera/data/corpus_reader.hpp"

#include <algorithm>
#include <filesystem>

#include "chimera/core/error.hpp"
#include "chimera/data/tokenizer.hpp"

namespace chimera::data {

CorpusReader::CorpusReader(std::vector<std::string> inputs, InputFormat format,
                           std::size_t piece_bytes, InputPosition from)
    : inputs_(std::move(inputs)), format_(format), piece_bytes_(piece_bytes), at_(from) {
  CHIMERA_CHECK(piece_bytes_ > 0, "pieces of {} bytes", piece_bytes_);
  CHIMERA_CHECK(at_.file <= inputs_.size(), "start in file {} of {}", at_.file, inputs_.size());
  std::error_code ec;
  for (std::size_t i = 0; i < at_.file; ++i)
    disk_before_ += std::filesystem::file_size(inputs_[i], ec);
}

CorpusReader::~CorpusReader() = default;

bool CorpusReader::open_next_file() {
  if (at_.file >= inputs_.size()) return false;
  const std::string& path = inputs_[at_.file];
  file_ = std::make_unique<InputFile>(path);
  at_file_start_ = at_.offset == 0;
  if (at_.offset > 0) file_->skip(at_.offset);
  buffer_.clear();
  file_more_ = true;
  file_open_ = true;
  return true;
}

bool CorpusReader::next(CorpusPiece& piece) {
  while (true) {
    if (!file_open_ && !open_next_file()) return false;
    // Read until the buffer holds a cut point, or the file ends.
    std::size_t cut = 0;
    while (true) {
      if (buffer_.size() >= piece_bytes_ || !file_more_) {
        if (!file_more_) {
          cut = buffer_.size();
          break;
        }
        if (format_ == InputFormat::Text) {
          cut = safe_split_point(buffer_, piece_bytes_);
        } else {
          const std::size_t newline = buffer_.rfind('\n', piece_bytes_);
          cut = newline == std::string::npos ? 0 : newline + 1;
        }
        if (cut > 0) break;
      }
      // No cut yet: read on (a piece may exceed piece_bytes when there is no cut point).
      const std::size_t want = std::max(piece_bytes_, buffer_.size()) + piece_bytes_ / 2 + 1;
      file_more_ = file_->read(buffer_, want - buffer_.size());
    }
    if (cut == 0 && !file_more_ && !at_file_start_) {
      // The file is done: move on to the next one.
      std::error_code ec;
      disk_before_ += std::filesystem::file_size(inputs_[at_.file], ec);
      file_.reset();
      file_open_ = false;
      ++at_.file;
      at_.offset = 0;
      at_.line = 1;
      continue;
    }
    CHIMERA_REQUIRE(cut > 0 || !at_file_start_, "{}: empty input file", inputs_[at_.file]);
    piece.start = at_;
    piece.starts_file = at_file_start_;
    piece.text.assign(buffer_, 0, cut);
    buffer_.erase(0, cut);
    piece.disk_done = disk_before_ + file_->disk_offset();
    at_.offset += cut;
    at_.line += static_cast<std::uint64_t>(std::count(piece.text.begin(), piece.text.end(), '\n'));
    at_file_start_ = false;
    return true;
  }
}

}  // namespace chimera::data
