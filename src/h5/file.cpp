#include "chimera/h5/file.hpp"

#include <filesystem>
#include <fstream>

#include "chimera/h5/check.hpp"

namespace chimera::h5 {

Handle open_file_read(const std::string& path, const std::string& what) {
  silence_library_errors();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  CHIMERA_REQUIRE(std::filesystem::exists(status), "{}: no such file (expected a {})", path, what);
  CHIMERA_REQUIRE(!std::filesystem::is_directory(status), "{}: is a directory (expected a {})",
                  path, what);
  CHIMERA_REQUIRE(std::filesystem::is_regular_file(status),
                  "{}: not a regular file (expected a {})", path, what);
  CHIMERA_REQUIRE(std::ifstream(path).good(), "{}: cannot be read (permissions?); expected a {}",
                  path, what);
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  CHIMERA_REQUIRE(is_hdf5 > 0, "{}: not an HDF5 file (expected a {})", path, what);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  CHIMERA_REQUIRE(id >= 0, "{}: damaged HDF5 file, cannot be opened as a {} (HDF5: {})", path, what,
                  library_error_message());
  return file_handle(id);
}

Handle create_file(const std::string& path, hid_t file_access) {
  silence_library_errors();
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access);
  CHIMERA_REQUIRE(id >= 0, "{}: cannot create the file (is its directory writable?) (HDF5: {})",
                  path, library_error_message());
  return file_handle(id);
}

bool has_link(hid_t location, const std::string& path) {
  // H5Lexists does not walk intermediate groups: check every prefix of a/b/c.
  std::size_t pos = 0;
  while (true) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (H5Lexists(location, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

bool has_attribute(hid_t object, const std::string& name) {
  return H5Aexists(object, name.c_str()) > 0;
}

std::vector<std::int64_t> dataset_shape(hid_t dataset) {
  Handle space = dataspace_handle(H5_CHECK(H5Dget_space(dataset), "dataspace of a dataset"));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space.get()), "dataset rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "dataset dimensions");
  return {dims.begin(), dims.end()};
}

std::string describe_type(hid_t datatype) {
  const std::size_t bits = H5Tget_size(datatype) * 8;
  switch (H5Tget_class(datatype)) {
    case H5T_INTEGER:
      return fmt::format("{}int{}", H5Tget_sign(datatype) == H5T_SGN_NONE ? "u" : "", bits);
    case H5T_FLOAT: {
      // bfloat16 has float32's 8-bit exponent; float16 a 5-bit one.
      std::size_t sign = 0, exponent_pos = 0, exponent_bits = 0, mantissa_pos = 0, mantissa = 0;
      H5Tget_fields(datatype, &sign, &exponent_pos, &exponent_bits, &mantissa_pos, &mantissa);
      return bits == 16 && exponent_bits == 8 ? "bfloat16" : fmt::format("float{}", bits);
    }
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    default:
      return "an unsupported type";
  }
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace chimera::h5
