#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chimera/core/error.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"

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
  EXPECT_THROW(read_string_attribute(file.get(), "step", path), InputError);
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

TEST(H5File, VariableLengthStringsAreRefused) {
  const std::string path = temp_path("vlen.h5");
  {
    Handle file = create_file(path);
    Handle type = datatype_handle(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), H5T_VARIABLE);
    Handle space = dataspace_handle(H5Screate(H5S_SCALAR));
    Handle attribute = attribute_handle(
        H5Acreate2(file.get(), "tokenizer", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const char* text = "gpt2";
    ASSERT_GE(H5Awrite(attribute.get(), type.get(), &text), 0);
    write_string_attribute(file.get(), "empty", "");
  }
  Handle file = open_file_read(path, "test file");
  try {
    read_string_attribute(file.get(), "tokenizer", path);
    FAIL() << "a variable-length string was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("numpy.bytes_"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_string_attribute(file.get(), "empty", path), "");
}

}  // namespace
}  // namespace chimera::h5
