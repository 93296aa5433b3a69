// safetensors: the writer's layout, the reader's round trip and half-precision widening, and
// every kind of damaged file refused with a message that names the file and the problem.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "chimera/io/safetensors.hpp"
#include "input_error.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;
using chimera::testing::input_error;

fs::path temp_file(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_safetensors_test";
  fs::create_directories(dir);
  return dir / name;
}

// A file with this header text (padded to 8 bytes) and `data_bytes` bytes of data.
std::string file_with(const std::string& name, std::string header, std::size_t data_bytes,
                      std::int64_t claimed_length = -1) {
  header.append((8 - header.size() % 8) % 8, ' ');
  const auto length = static_cast<std::uint64_t>(claimed_length >= 0 ? claimed_length
                                                                     : std::int64_t(header.size()));
  const fs::path path = temp_file(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
  return path.string();
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

std::string refusal(const std::string& path) {
  return input_error([&] { SafetensorsReader reader(path); });
}

TEST(Safetensors, WriterMatchesTheReferenceLayoutAndRoundTrips) {
  const std::vector<float> a{1.0F, -2.5F, 3.0F, 0.125F, 7.0F, 8.0F};
  const std::vector<float> b{42.0F};
  const std::vector<SafetensorsTensor> tensors{{"z.weight", {2, 3}, a}, {"a.bias", {1}, b}};
  const std::string path = temp_file("roundtrip.safetensors").string();
  write_safetensors(path, tensors, {{"format", "pt"}});

  std::ifstream in(path, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  EXPECT_EQ(length % 8, 0U);
  // Compact JSON, metadata first, tensors by name with their data in the same order.
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"format":"pt"},"a.bias":{"dtype":"F32","shape":[1],)"
            R"("data_offsets":[0,4]},"z.weight":{"dtype":"F32","shape":[2,3],)"
            R"("data_offsets":[4,28]}})");
  EXPECT_EQ(fs::file_size(path), 8 + length + 28);

  const SafetensorsReader reader(path);
  ASSERT_EQ(reader.tensors().size(), 2U);
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  const SafetensorsEntry* z = reader.find("z.weight");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(reader.read_f32(*z), a);
  EXPECT_EQ(reader.read_f32(*reader.find("a.bias")), b);
  EXPECT_EQ(reader.find("missing"), nullptr);
}

TEST(Safetensors, HalfPrecisionWidensExactly) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0F);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0F);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0F);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0F, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0F, -24));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0F);
  EXPECT_EQ(bf16_to_f32(0xC0A0), -5.0F);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(bf16_to_f32(0x1234)), 0x12340000U);

  // Two F16 values and one BF16 value in one file.
  const std::string path = file_with("half.safetensors",
                                     R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                                     R"("b":{"dtype":"BF16","shape":[],"data_offsets":[4,6]}})",
                                     0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary | std::ios::ate);
    const std::uint16_t values[3] = {0x3C00, 0xC000, 0xC0A0};
    f.write(reinterpret_cast<const char*>(values), sizeof(values));
  }
  const SafetensorsReader reader(path);
  EXPECT_EQ(reader.read_f32(*reader.find("h")), (std::vector<float>{1.0F, -2.0F}));
  EXPECT_EQ(reader.read_f32(*reader.find("b")), (std::vector<float>{-5.0F}));
}

TEST(Safetensors, OtherDtypesParseButAreNotReadAsWeights) {
  const std::string path = file_with(
      "int.safetensors", R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16);
  const SafetensorsReader reader(path);
  EXPECT_TRUE(contains(input_error([&] { (void)reader.read_f32(*reader.find("ids")); }),
                       "tensor 'ids' has dtype I64; only F32, F16 and BF16"));
}

TEST(Safetensors, DamagedFilesAreRefusedWithTheProblem) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    std::string name, header;
    std::size_t data;
    std::int64_t length;
    std::string message;
  };
  const std::vector<Case> cases{
      {"short", "", 0, -2, "too short for a safetensors file"},
      {"length", "{" + ok_entry + "}", 8, 1 << 20, "header length 1048576 exceeds the"},
      {"json", R"({"t":)", 0, -1, "header is not valid JSON"},
      {"array", "[1, 2]", 0, -1, "JSON but not an object of tensors"},
      {"metadata", R"({"__metadata__":{"format":3}})", 0, -1, "__metadata__ entry 'format'"},
      {"dtype", R"({"t":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", 8, -1,
       "unknown dtype 'F12'"},
      {"shape", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, -1,
       "not a non-negative integer"},
      {"huge", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
       -1, "too large"},
      {"offsets", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, -1,
       "expected two byte offsets begin <= end"},
      {"size", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, -1,
       "(8 bytes) but its shape [3] of F32 needs 12 bytes"},
      {"past", "{" + ok_entry + "}", 4, -1, "past the end of the data section (4 bytes)"},
      {"overlap", "{" + ok_entry + R"(,"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12,
       -1, "tensors 't' and 'u' overlap"},
      {"gap", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, -1,
       "bytes [0, 4) of the data section belong to no tensor"},
      {"trailing", "{" + ok_entry + "}", 12, -1,
       "data section has 12 bytes but the tensors cover 8"},
  };
  for (const Case& c : cases) {
    const std::string path = file_with(c.name + ".safetensors", c.header, c.data, c.length);
    if (c.name == "short") fs::resize_file(path, 5);
    const std::string message = refusal(path);
    EXPECT_TRUE(contains(message, path)) << c.name;
    EXPECT_TRUE(contains(message, c.message)) << c.name;
  }
  EXPECT_TRUE(contains(refusal(temp_file("absent.safetensors").string()),
                       "cannot read the safetensors file"));
}

TEST(Safetensors, EmptyFileOfTensorsAndMetadataOnlyIsValid) {
  const SafetensorsReader reader(file_with("empty.safetensors", R"({"__metadata__":{}})", 0));
  EXPECT_TRUE(reader.tensors().empty());
}

}  // namespace
}  // namespace chimera::io
