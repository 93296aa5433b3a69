#pragma once
// A corpus file as `chimera prep` reads it: plain, gzip- or zstd-compressed, recognised by its
// first bytes (not its name), decompressed on the fly in bounded reads.
#include <cstdint>
#include <memory>
#include <string>

namespace chimera::data {

class InputFile {
 public:
  // InputError naming the file when it cannot be opened.
  explicit InputFile(const std::string& path);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  // Appends up to `count` uncompressed bytes to `out`; returns false at the end of the file.
  // InputError naming the file for a read error or damaged / truncated compressed data.
  bool read(std::string& out, std::size_t count);
  // Reads and drops `count` uncompressed bytes (to resume inside a file). InputError when the
  // file is shorter.
  void skip(std::uint64_t count);
  // Bytes of the file on disk consumed so far (compressed bytes for .gz and .zst): for progress.
  std::uint64_t disk_offset() const;
  const std::string& path() const { return path_; }

  struct Impl;

 private:
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

// The whole (uncompressed) content of a file, plain, .gz or .zst.
std::string read_text_file(const std::string& path);

}  // namespace chimera::data
