#include "chimera/data/input_file.hpp"

#include <zlib.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "chimera/core/error.hpp"

namespace chimera::data {

namespace {

constexpr std::array<unsigned char, 4> kZstdMagic = {0x28, 0xB5, 0x2F, 0xFD};

bool starts_with_zstd_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::array<unsigned char, 4> head{};
  const std::size_t got = std::fread(head.data(), 1, head.size(), f);
  std::fclose(f);
  return got == head.size() && head == kZstdMagic;
}

}  // namespace

// One of two decoders: zlib's gzFile (which also reads plain files unchanged), or a zstd stream.
struct InputFile::Impl {
  gzFile gz = nullptr;
  std::FILE* file = nullptr;
  ZSTD_DCtx* zstd = nullptr;
  std::vector<char> in;  // compressed bytes for zstd
  ZSTD_inBuffer in_buffer{nullptr, 0, 0};
  std::uint64_t disk_read = 0;  // compressed bytes consumed (zstd)
  std::size_t frame_left = 0;   // zstd's hint: 0 once a frame has ended
  bool eof = false;

  ~Impl() {
    if (gz != nullptr) gzclose(gz);
    if (file != nullptr) std::fclose(file);
    if (zstd != nullptr) ZSTD_freeDCtx(zstd);
  }

  std::size_t read_zstd(char* out, std::size_t count, const std::string& path) {
    ZSTD_outBuffer out_buffer{out, count, 0};
    while (out_buffer.pos < out_buffer.size) {
      if (in_buffer.pos == in_buffer.size && !eof) {
        const std::size_t got = std::fread(in.data(), 1, in.size(), file);
        CHIMERA_REQUIRE(got > 0 || std::feof(file) != 0, "{}: cannot be read: {}", path,
                        std::strerror(errno));
        eof = got == 0;
        in_buffer = {in.data(), got, 0};
        disk_read += got;
      }
      const std::size_t out_before = out_buffer.pos, in_before = in_buffer.pos;
      // With no input left this still flushes what the decoder holds.
      const std::size_t hint = ZSTD_decompressStream(zstd, &out_buffer, &in_buffer);
      CHIMERA_REQUIRE(ZSTD_isError(hint) == 0, "{}: damaged zstd data: {}", path,
                      ZSTD_getErrorName(hint));
      if (eof && out_buffer.pos == out_before && in_buffer.pos == in_before) {
        // The end: complete only if the last frame was (a 0 hint once it is fully flushed).
        CHIMERA_REQUIRE(frame_left == 0, "{}: the zstd data is truncated", path);
        break;
      }
      frame_left = hint;
    }
    return out_buffer.pos;
  }
};

InputFile::InputFile(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  if (starts_with_zstd_magic(path)) {
    impl_->file = std::fopen(path.c_str(), "rb");
    impl_->zstd = ZSTD_createDCtx();
    CHIMERA_REQUIRE(impl_->file != nullptr && impl_->zstd != nullptr, "{}: cannot open: {}", path,
                    std::strerror(errno));
    impl_->in.resize(ZSTD_DStreamInSize());
  } else {
    impl_->gz = gzopen(path.c_str(), "rb");
    CHIMERA_REQUIRE(impl_->gz != nullptr, "{}: cannot open the text file", path);
    gzbuffer(impl_->gz, 1 << 20);
  }
}

InputFile::~InputFile() = default;

bool InputFile::read(std::string& out, std::size_t count) {
  const std::size_t old = out.size();
  out.resize(old + count);
  std::size_t got = 0;
  if (impl_->zstd != nullptr) {
    got = impl_->read_zstd(out.data() + old, count, path_);
  } else {
    const int n = gzread(impl_->gz, out.data() + old, static_cast<unsigned>(count));
    int status = Z_OK;
    const char* message = gzerror(impl_->gz, &status);
    CHIMERA_REQUIRE(n >= 0 && status == Z_OK, "{}: cannot be read: {}", path_,
                    message != nullptr ? message : "read error");
    got = static_cast<std::size_t>(n);
  }
  out.resize(old + got);
  return got == count;
}

void InputFile::skip(std::uint64_t count) {
  std::string scratch;
  while (count > 0) {
    scratch.clear();
    const auto step = static_cast<std::size_t>(std::min<std::uint64_t>(count, 1 << 20));
    read(scratch, step);
    CHIMERA_REQUIRE(scratch.size() == step, "{}: is shorter than when it was first read", path_);
    count -= step;
  }
}

std::uint64_t InputFile::disk_offset() const {
  if (impl_->zstd != nullptr) return impl_->disk_read;
  return static_cast<std::uint64_t>(gzoffset(impl_->gz));
}

std::string read_text_file(const std::string& path) {
  InputFile file(path);
  std::string text;
  while (file.read(text, std::size_t{1} << 20)) {
  }
  return text;
}

}  // namespace chimera::data
