#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/h5/stored_data.hpp"

namespace chimera::h5 {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/h5_" + name;
}

TEST(H5Handle, ClosesOnDestructionAndMove) {
  hid_t id = H5I_INVALID_HID;
  {
    Handle space = dataspace_handle(H5Screate(H5S_SCALAR));
    id = space.get();
    EXPECT_GT(H5Iis_valid(id), 0);
    Handle moved = std::move(space);
    EXPECT_FALSE(space.valid());
    EXPECT_EQ(moved.get(), id);
  }
  EXPECT_LE(H5Iis_valid(id), 0);
}

TEST(H5Check, ThrowsWithFileLineAndLibraryMessage) {
  silence_library_errors();
  try {
    H5_CHECK(H5Dopen2(-1, "nothing", H5P_DEFAULT), "opening {}", "nothing");
    FAIL() << "H5_CHECK did not throw";
  } catch (const InputError&) {
    FAIL() << "an HDF5 failure is not an input error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test_h5.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("opening nothing"), std::string::npos) << what;
    EXPECT_NE(what.find("HDF5:"), std::string::npos) << what;
  }
  const Handle space = dataspace_handle(H5_CHECK(H5Screate(H5S_SCALAR)));  // yields the id
  EXPECT_TRUE(space.valid());
}

TEST(H5File, AttributesRoundTrip) {
  const std::string path = temp_path("attributes.h5");
  {
    Handle file = create_file(path);
    write_int_attribute(file.get(), "step", -1234567890123);
    write_string_attribute(file.get(), "config", "[model]\nn_layer = 2\n\u00e9");
  }
  Handle file = open_file_read(path, "test file");
  EXPECT_EQ(read_int_attribute(file.get(), "step", path), -1234567890123);
  EXPECT_EQ(read_string_attribute(file.get(), "config", path), "[model]\nn_layer = 2\n\u00e9");
  EXPECT_THROW(read_int_attribute(file.get(), "config", path), InputError);
  EXPECT_EQ(read_string_attribute(file.get(), "step", path), "-1234567890123");
  EXPECT_THROW(read_int_attribute(file.get(), "missing", path), InputError);
  EXPECT_FALSE(has_link(file.get(), "a/b"));
}

TEST(H5File, OpenReportsMissingNotHdf5AndTruncatedFiles) {
  const auto message = [](const std::string& path) {
    try {
      open_file_read(path, "thing");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(temp_path("missing.h5")).find("no such file"), std::string::npos);
  const std::string text = temp_path("text.h5");
  std::ofstream(text) << "just some text, not HDF5\n";
  EXPECT_NE(message(text).find("not an HDF5 file"), std::string::npos);

  const std::string whole = temp_path("whole.h5");
  {
    Handle file = create_file(whole);
    const hsize_t n = 100000;
    Handle space = dataspace_handle(H5Screate_simple(1, &n, nullptr));
    Handle dataset = dataset_handle(H5Dcreate2(file.get(), "x", H5T_NATIVE_INT32, space.get(),
                                               H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    std::vector<int> data(n, 7);
    ASSERT_GE(H5Dwrite(dataset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
              0);
  }
  const std::string truncated = temp_path("truncated.h5");
  std::filesystem::copy_file(whole, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(whole) / 2);
  EXPECT_NE(message(truncated).find("damaged"), std::string::npos) << message(truncated);
}

TEST(H5File, DescribesTypesAndShapes) {
  EXPECT_EQ(describe_type(H5T_STD_U16LE), "uint16");
  EXPECT_EQ(describe_type(H5T_STD_I32LE), "int32");
  EXPECT_EQ(describe_type(H5T_IEEE_F32LE), "float32");
  EXPECT_EQ(format_shape({768, 2304}), "[768, 2304]");
}

}  // namespace
}  // namespace chimera::h5

namespace chimera::h5 {
namespace {

void write_vlen_string(hid_t object, const char* name, const char* text) {
  Handle type = datatype_handle(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space = dataspace_handle(H5Screate(H5S_SCALAR));
  Handle attribute =
      attribute_handle(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Awrite(attribute.get(), type.get(), &text), 0);
}

// `value` in memory as `memory_type`, stored as `stored_type`.
template <typename T>
void write_scalar(hid_t object, const char* name, hid_t stored_type, hid_t memory_type, T value) {
  Handle space = dataspace_handle(H5Screate(H5S_SCALAR));
  Handle attribute = attribute_handle(
      H5Acreate2(object, name, stored_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Awrite(attribute.get(), memory_type, &value), 0);
}

void write_fixed_string(hid_t object, const char* name, const std::string& text, H5T_str_t pad) {
  Handle type = datatype_handle(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), text.size());
  H5Tset_strpad(type.get(), pad);
  Handle space = dataspace_handle(H5Screate(H5S_SCALAR));
  Handle attribute =
      attribute_handle(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Awrite(attribute.get(), type.get(), text.data()), 0);
}

// Every form h5py, h5netcdf or the C API give a string or an integer reads as one.
TEST(H5File, AttributesReadInEveryForm) {
  const std::string path = temp_path("forms.h5");
  const std::string long_text(10000, 'x');
  {
    Handle file = create_file(path);
    write_vlen_string(file.get(), "vlen", "gpt2 \u00e9");
    write_vlen_string(file.get(), "vlen_long", long_text.c_str());
    write_vlen_string(file.get(), "vlen_empty", "");
    write_vlen_string(file.get(), "vlen_number", " 50257\n");
    write_fixed_string(file.get(), "space_padded", "gpt2    ", H5T_STR_SPACEPAD);
    write_fixed_string(file.get(), "null_terminated", std::string("ab\0", 3), H5T_STR_NULLTERM);
    write_scalar(file.get(), "u8", H5T_STD_U8LE, H5T_NATIVE_UINT8, std::uint8_t{200});
    write_scalar(file.get(), "i16be", H5T_STD_I16BE, H5T_NATIVE_INT16, std::int16_t{-300});
    write_scalar(file.get(), "u64", H5T_STD_U64LE, H5T_NATIVE_UINT64, std::uint64_t{50257});
    write_scalar(file.get(), "u64_huge", H5T_STD_U64LE, H5T_NATIVE_UINT64, ~std::uint64_t{0});
    write_scalar(file.get(), "float", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1.5);
  }
  Handle file = open_file_read(path, "test file");
  EXPECT_EQ(read_string_attribute(file.get(), "vlen", path), "gpt2 \u00e9");
  EXPECT_EQ(read_string_attribute(file.get(), "vlen_long", path), long_text);
  EXPECT_EQ(read_string_attribute(file.get(), "vlen_empty", path), "");
  EXPECT_EQ(read_int_attribute(file.get(), "vlen_number", path), 50257);
  EXPECT_EQ(read_string_attribute(file.get(), "space_padded", path), "gpt2");
  EXPECT_EQ(read_string_attribute(file.get(), "null_terminated", path), "ab");
  EXPECT_EQ(read_int_attribute(file.get(), "u8", path), 200);
  EXPECT_EQ(read_int_attribute(file.get(), "i16be", path), -300);
  EXPECT_EQ(read_int_attribute(file.get(), "u64", path), 50257);
  EXPECT_EQ(read_string_attribute(file.get(), "u64", path), "50257");
  EXPECT_EQ(read_optional_int_attribute(file.get(), "absent", path), std::nullopt);
  EXPECT_EQ(read_optional_string_attribute(file.get(), "vlen", path), "gpt2 \u00e9");
  const auto message = [&](auto read, const char* name) {
    try {
      read(file.get(), name, path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(read_int_attribute, "u64_huge").find("does not fit"), std::string::npos);
  EXPECT_NE(message(read_int_attribute, "vlen").find("expected an integer"), std::string::npos);
  EXPECT_NE(message(read_int_attribute, "float").find("found float64"), std::string::npos);
  EXPECT_NE(message(read_string_attribute, "float").find("found float64"), std::string::npos);
}

// A variable-length string whose heap object claims more bytes than its collection holds (what
// made libhdf5 copy out of bounds) is an InputError, read without libhdf5's heap code.
// A 1-D uint16 dataset of 5000 values in chunks of 1000 (0 = contiguous), with the given filter
// (0 = none), and its first `written` values written.
Handle make_dataset(hid_t file, const char* name, hsize_t chunk, H5Z_filter_t filter,
                    hsize_t written) {
  const hsize_t n = 5000;
  Handle space = dataspace_handle(H5Screate_simple(1, &n, nullptr));
  Handle create = plist_handle(H5Pcreate(H5P_DATASET_CREATE));
  if (chunk > 0) H5_CHECK(H5Pset_chunk(create.get(), 1, &chunk));
  // Optional: a filter HDF5 does not have is then recorded in the pipeline, and skipped on write.
  if (filter > 0) H5_CHECK(H5Pset_filter(create.get(), filter, H5Z_FLAG_OPTIONAL, 0, nullptr));
  Handle dataset = dataset_handle(H5Dcreate2(file, name, H5T_NATIVE_UINT16, space.get(),
                                             H5P_DEFAULT, create.get(), H5P_DEFAULT));
  EXPECT_TRUE(dataset.valid());
  if (written > 0) {
    const hsize_t start = 0;
    H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &written, nullptr));
    Handle memory = dataspace_handle(H5Screate_simple(1, &written, nullptr));
    const std::vector<std::uint16_t> values(written, 7);
    H5_CHECK(H5Dwrite(dataset.get(), H5T_NATIVE_UINT16, memory.get(), space.get(), H5P_DEFAULT,
                      values.data()));
  }
  return dataset;
}

TEST(H5StoredData, RefusesUndecodableFiltersAndValuesNeverWritten) {
  silence_library_errors();
  Handle file = create_file(temp_path("stored_data.h5"));
  const hid_t f = file.get();
  const auto problem = [](const Handle& dataset) {
    return stored_data_problem(dataset.get()).value_or("");
  };
  EXPECT_EQ(problem(make_dataset(f, "whole", 1000, 0, 5000)), "");
  EXPECT_EQ(problem(make_dataset(f, "contiguous", 0, 0, 5000)), "");
  EXPECT_EQ(problem(make_dataset(f, "gzip", 1000, H5Z_FILTER_DEFLATE, 5000)), "");
  EXPECT_EQ(problem(make_dataset(f, "lzf", 1000, 32000, 5000)),
            "is compressed with filter 'lzf' (id 32000), which this HDF5 cannot decode: rewrite "
            "it uncompressed or with compression='gzip'");
  EXPECT_NE(
      problem(make_dataset(f, "bitshuffle", 1000, 32008, 5000)).find("'bitshuffle' (id 32008)"),
      std::string::npos);
  const std::string never = "was created but never written (no data stored)";
  EXPECT_EQ(problem(make_dataset(f, "never_chunked", 1000, 0, 0)).rfind(never, 0), 0u);
  EXPECT_EQ(problem(make_dataset(f, "never_contiguous", 0, 0, 0)).rfind(never, 0), 0u);
  EXPECT_EQ(problem(make_dataset(f, "partly", 1000, 0, 2500))
                .rfind("was only partly written: 3 of its 5 chunks hold data", 0),
            0u);
}

TEST(H5File, DamagedVariableLengthStringIsAnInputError) {
  const std::string path = temp_path("vlen_damaged.h5");
  {
    Handle file = create_file(path);
    write_vlen_string(file.get(), "tokenizer", "gpt2-with-a-name");
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  // Object 1 follows the 16-byte collection header: index, count, reserved, then its size.
  const std::size_t size_at = heap + 16 + 8;
  ASSERT_EQ(bytes[size_at], 16);  // strlen("gpt2-with-a-name")
  for (const unsigned char claimed : {0x7f, 0x03}) {
    std::string damaged = bytes;
    damaged[size_at + (claimed == 0x7f ? 7 : 0)] = static_cast<char>(claimed);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
    Handle file = open_file_read(path, "test file");
    try {
      read_string_attribute(file.get(), "tokenizer", path);
      FAIL() << "a damaged heap object was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("is damaged"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace chimera::h5
