#pragma once
// Hugging Face's safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON, then the data section. The JSON is an object
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets
// into the data section), plus an optional "__metadata__" object of strings.
//
// Reading validates everything against the file before any tensor is read, as the reference
// implementation does: the header length against the file size, every dtype, shape and offset
// pair, each tensor's byte count against its shape and dtype, and that the tensors tile the
// data section exactly (no overlap, no gap, nothing past the end). A damaged file is one
// InputError naming the file and the problem.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::io {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as in the file: "F32", "F16", "BF16", "I64", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section
  std::uint64_t end = 0;
  std::int64_t numel() const;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Largest header the reader accepts (the reference implementation's limit).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Validates the JSON header `json` of a file whose data section holds `data_bytes` bytes.
// `path` names the file in errors.
SafetensorsHeader parse_safetensors_header(std::string_view json, std::uint64_t data_bytes,
                                           const std::string& path);

class SafetensorsReader {
 public:
  // Reads and validates the header. InputError when the file is missing, unreadable or damaged.
  explicit SafetensorsReader(std::string path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(std::string_view name) const;

  // The tensor's values as float32: F32 as stored, F16 and BF16 widened (exactly: every such
  // value is a float32). InputError for any other dtype, or when the read fails.
  std::vector<float> read_f32(const SafetensorsEntry& entry) const;

 private:
  std::string path_;
  std::uint64_t data_offset_ = 0;  // 8 + header length
  SafetensorsHeader header_;
};

struct SafetensorsTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;
};

// Writes F32 tensors as the reference implementation's serializer does: a compact JSON header
// with "__metadata__" first and the tensors in name order, padded with spaces to a multiple of
// 8 bytes, then the data in the same order. Written to `path`.tmp, then renamed. InputError when
// the file cannot be written.
void write_safetensors(const std::string& path, std::span<const SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata);

// IEEE half and bfloat16 bit patterns widened to float32 (exact).
float f16_to_f32(std::uint16_t bits);
float bf16_to_f32(std::uint16_t bits);

}  // namespace chimera::io
