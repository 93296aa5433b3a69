// Reading and writing Hugging Face safetensors files (include/chimera/io/safetensors.hpp).
#include "chimera/io/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "chimera/core/error.hpp"
#include "chimera/core/files.hpp"
#include "chimera/io/paths.hpp"

namespace chimera::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

namespace {

using Json = nlohmann::json;

// Bytes per element of every dtype the format defines.
std::uint64_t dtype_bytes(std::string_view dtype) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 15> kSizes{{
      {"BOOL", 1},
      {"U8", 1},
      {"I8", 1},
      {"F8_E5M2", 1},
      {"F8_E4M3", 1},
      {"I16", 2},
      {"U16", 2},
      {"F16", 2},
      {"BF16", 2},
      {"I32", 4},
      {"U32", 4},
      {"F32", 4},
      {"I64", 8},
      {"U64", 8},
      {"F64", 8},
  }};
  for (const auto& [name, bytes] : kSizes) {
    if (name == dtype) return bytes;
  }
  return 0;
}

std::uint64_t file_size_of(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  CHIMERA_REQUIRE(!ec, "{}: cannot read the safetensors file ({})", path, ec.message());
  return size;
}

// A non-negative integer that fits in int64 (shapes and offsets); nullopt for anything else.
std::optional<std::uint64_t> as_size(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (x <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return x;
  }
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  }
  return std::nullopt;
}

SafetensorsEntry parse_entry(const std::string& name, const Json& v, const std::string& path) {
  CHIMERA_REQUIRE(v.is_object(),
                  "{}: header entry '{}' is not an object with dtype, shape and data_offsets", path,
                  name);
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = v.find("dtype");
  CHIMERA_REQUIRE(dtype != v.end() && dtype->is_string(), "{}: tensor '{}' has no dtype string",
                  path, name);
  e.dtype = dtype->get<std::string>();
  const std::uint64_t element_bytes = dtype_bytes(e.dtype);
  CHIMERA_REQUIRE(element_bytes > 0,
                  "{}: tensor '{}' has unknown dtype '{}' (safetensors dtypes: F32, F16, BF16, "
                  "F64, I64, I32, ...)",
                  path, name, e.dtype);

  const auto shape = v.find("shape");
  CHIMERA_REQUIRE(shape != v.end() && shape->is_array(),
                  "{}: tensor '{}' has no shape (a list of dimensions)", path, name);
  // The element count, checked for overflow against the largest byte count a file can hold.
  std::uint64_t numel = 1;
  constexpr std::uint64_t kLimit = static_cast<std::uint64_t>(1) << 62;
  for (const Json& d : *shape) {
    const auto dim = as_size(d);
    CHIMERA_REQUIRE(dim.has_value(),
                    "{}: tensor '{}' has shape {} with a dimension that is not "
                    "a non-negative integer",
                    path, name, shape->dump());
    e.shape.push_back(static_cast<std::int64_t>(*dim));
    CHIMERA_REQUIRE(*dim == 0 || numel <= kLimit / *dim, "{}: tensor '{}' has shape {}: too large",
                    path, name, shape->dump());
    numel *= *dim;
  }
  CHIMERA_REQUIRE(numel <= kLimit / element_bytes, "{}: tensor '{}' has shape {}: too large", path,
                  name, shape->dump());

  const auto offsets = v.find("data_offsets");
  CHIMERA_REQUIRE(offsets != v.end() && offsets->is_array() && offsets->size() == 2,
                  "{}: tensor '{}' has no data_offsets [begin, end]", path, name);
  const auto begin = as_size((*offsets)[0]);
  const auto end = as_size((*offsets)[1]);
  CHIMERA_REQUIRE(begin && end && *begin <= *end,
                  "{}: tensor '{}' has data_offsets {}: expected two byte offsets begin <= end",
                  path, name, offsets->dump());
  e.begin = *begin;
  e.end = *end;
  CHIMERA_REQUIRE(e.end - e.begin == numel * element_bytes,
                  "{}: tensor '{}' has data_offsets [{}, {}] ({} bytes) but its shape {} of {} "
                  "needs {} bytes",
                  path, name, e.begin, e.end, e.end - e.begin, shape->dump(), e.dtype,
                  numel * element_bytes);
  return e;
}

}  // namespace

std::int64_t SafetensorsEntry::numel() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view json, std::uint64_t data_bytes,
                                           const std::string& path) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& e) {
    throw InputError(
        fmt::format("{}: the safetensors header is not valid JSON (byte {} of {}); "
                    "the file is damaged or not safetensors",
                    path, e.byte, json.size()));
  }
  CHIMERA_REQUIRE(root.is_object(),
                  "{}: the safetensors header is JSON but not an object of tensors", path);
  SafetensorsHeader header;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      CHIMERA_REQUIRE(value.is_object(), "{}: __metadata__ is not an object of strings", path);
      for (const auto& [key, text] : value.items()) {
        CHIMERA_REQUIRE(text.is_string(), "{}: __metadata__ entry '{}' is not a string", path, key);
        header.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    header.tensors.push_back(parse_entry(name, value, path));
  }

  // The tensors must tile the data section: in offset order, each starts where the previous
  // ends, the first at 0 and the last at its end.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : header.tensors) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto* e : by_offset) {
    CHIMERA_REQUIRE(e->end <= data_bytes,
                    "{}: tensor '{}' has data_offsets [{}, {}] past the end of the data section "
                    "({} bytes); the file is truncated",
                    path, e->name, e->begin, e->end, data_bytes);
    CHIMERA_REQUIRE(e->begin >= covered, "{}: tensors '{}' and '{}' overlap (bytes [{}, {}))", path,
                    previous != nullptr ? previous->name : "", e->name, e->begin, covered);
    CHIMERA_REQUIRE(e->begin == covered,
                    "{}: bytes [{}, {}) of the data section belong to no tensor", path, covered,
                    e->begin);
    covered = e->end;
    previous = e;
  }
  CHIMERA_REQUIRE(covered == data_bytes,
                  "{}: the data section has {} bytes but the tensors cover {}; the file is "
                  "damaged",
                  path, data_bytes, covered);
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return header;
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  require_not_a_directory(path_, "a safetensors file");
  const std::uint64_t size = file_size_of(path_);
  std::ifstream in(path_, std::ios::binary);
  CHIMERA_REQUIRE(in.good(), "{}: cannot open the safetensors file", path_);
  CHIMERA_REQUIRE(size >= 8,
                  "{}: {} bytes is too short for a safetensors file (an 8-byte header length, a "
                  "JSON header, then the data)",
                  path_, size);
  std::array<unsigned char, 8> length_bytes{};
  in.read(reinterpret_cast<char*>(length_bytes.data()), 8);
  CHIMERA_REQUIRE(in.good(), "{}: cannot read the header length", path_);
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | length_bytes[i];
  CHIMERA_REQUIRE(header_bytes <= size - 8,
                  "{}: the header length {} exceeds the {} bytes after it; the file is truncated "
                  "or not safetensors",
                  path_, header_bytes, size - 8);
  CHIMERA_REQUIRE(header_bytes <= kSafetensorsMaxHeaderBytes,
                  "{}: the header length {} is over the {} bytes safetensors allows", path_,
                  header_bytes, kSafetensorsMaxHeaderBytes);
  std::string json(header_bytes, '\0');
  in.read(json.data(), static_cast<std::streamsize>(header_bytes));
  CHIMERA_REQUIRE(in.good(), "{}: cannot read the {}-byte header", path_, header_bytes);
  data_offset_ = 8 + header_bytes;
  header_ = parse_safetensors_header(json, size - data_offset_, path_);
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  for (const auto& e : header_.tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<float> SafetensorsReader::read_f32(const SafetensorsEntry& entry) const {
  const bool half = entry.dtype == "F16" || entry.dtype == "BF16";
  CHIMERA_REQUIRE(entry.dtype == "F32" || half,
                  "{}: tensor '{}' has dtype {}; only F32, F16 and BF16 weights can be read", path_,
                  entry.name, entry.dtype);
  const auto n = static_cast<std::size_t>(entry.numel());
  std::vector<float> out(n);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_offset_ + entry.begin));
  if (!half) {
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * sizeof(float)));
  } else {
    std::vector<std::uint16_t> bits(n);
    in.read(reinterpret_cast<char*>(bits.data()),
            static_cast<std::streamsize>(n * sizeof(std::uint16_t)));
    const auto widen = entry.dtype == "F16" ? f16_to_f32 : bf16_to_f32;
    std::transform(bits.begin(), bits.end(), out.begin(), widen);
  }
  CHIMERA_REQUIRE(n == 0 || in.good(),
                  "{}: reading tensor '{}' failed (the file changed or is "
                  "unreadable)",
                  path_, entry.name);
  return out;
}

void write_safetensors(const std::string& path, std::span<const SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorsTensor*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto* t : sorted) {
    std::int64_t numel = 1;
    for (const auto d : t->shape) numel *= d;
    CHIMERA_CHECK(static_cast<std::size_t>(numel) == t->data.size(),
                  "tensor '{}' of shape {} given {} floats", t->name, fmt::join(t->shape, ","),
                  t->data.size());
    const std::uint64_t bytes = t->data.size_bytes();
    header[t->name] = {
        {"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');

  write_via_temporary(path, [&](const std::string& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    CHIMERA_REQUIRE(out.good(), "{}: cannot create the file", temporary);
    std::array<char, 8> length{};
    for (int i = 0; i < 8; ++i)
      length[static_cast<std::size_t>(i)] = static_cast<char>(json.size() >> (8 * i));
    out.write(length.data(), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    for (const auto* t : sorted) {
      out.write(reinterpret_cast<const char*>(t->data.data()),
                static_cast<std::streamsize>(t->data.size_bytes()));
    }
    out.flush();
    CHIMERA_REQUIRE(out.good(), "{}: writing failed (disk full?)", temporary);
  });
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits >> 15) << 31;
  const std::uint32_t exponent = (bits >> 10) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000U | mantissa << 13);
  return std::bit_cast<float>(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
}

float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace chimera::io
