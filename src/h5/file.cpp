#include "chimera/h5/file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "chimera/h5/check.hpp"

namespace chimera::h5 {

Handle open_file_read(const std::string& path, const std::string& what) {
  silence_library_errors();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  CHIMERA_REQUIRE(std::filesystem::exists(status), "{}: no such file (expected a {})", path, what);
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

namespace {

Handle scalar_space() {
  return dataspace_handle(H5_CHECK(H5Screate(H5S_SCALAR), "scalar dataspace"));
}

Handle open_attribute(hid_t object, const std::string& name, const std::string& context) {
  CHIMERA_REQUIRE(has_attribute(object, name), "{}: attribute '{}' is missing", context, name);
  Handle attribute = attribute_handle(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  CHIMERA_REQUIRE(attribute.valid(), "{}: attribute '{}' cannot be opened (HDF5: {})", context,
                  name, library_error_message());
  Handle space = dataspace_handle(H5Aget_space(attribute.get()));
  CHIMERA_REQUIRE(space.valid() && H5Sget_simple_extent_npoints(space.get()) == 1,
                  "{}: attribute '{}' must hold exactly one value", context, name);
  return attribute;
}

}  // namespace

void write_int_attribute(hid_t object, const std::string& name, std::int64_t value) {
  Handle space = scalar_space();
  Handle attribute = attribute_handle(H5_CHECK(
      H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      "creating attribute {}", name));
  H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value), "writing attribute {}", name);
}

std::int64_t read_int_attribute(hid_t object, const std::string& name, const std::string& context) {
  Handle attribute = open_attribute(object, name, context);
  Handle type = datatype_handle(H5Aget_type(attribute.get()));
  CHIMERA_REQUIRE(type.valid() && H5Tget_class(type.get()) == H5T_INTEGER,
                  "{}: attribute '{}' must be an integer, found {}", context, name,
                  type.valid() ? describe_type(type.get()) : "an unreadable type");
  std::int64_t value = 0;
  CHIMERA_REQUIRE(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) >= 0,
                  "{}: attribute '{}' cannot be read as an integer (HDF5: {})", context, name,
                  library_error_message());
  return value;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  // Fixed-length (see read_string_attribute); HDF5 sizes must be positive, so "" takes one NUL.
  Handle type = datatype_handle(H5_CHECK(H5Tcopy(H5T_C_S1), "string type"));
  H5_CHECK(H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1)));
  H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  Handle space = scalar_space();
  Handle attribute = attribute_handle(
      H5_CHECK(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
               "creating attribute {}", name));
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  H5_CHECK(H5Awrite(attribute.get(), type.get(), padded.data()), "writing attribute {}", name);
}

std::string read_string_attribute(hid_t object, const std::string& name,
                                  const std::string& context) {
  Handle attribute = open_attribute(object, name, context);
  Handle stored = datatype_handle(H5Aget_type(attribute.get()));
  CHIMERA_REQUIRE(stored.valid() && H5Tget_class(stored.get()) == H5T_STRING,
                  "{}: attribute '{}' must be a string, found {}", context, name,
                  stored.valid() ? describe_type(stored.get()) : "an unreadable type");
  // HDF5 1.10 reads variable-length strings through its global heap without checking the
  // lengths a damaged file claims (out-of-bounds copies and huge allocations, found by
  // fuzz/fuzz_checkpoint), so only fixed-length strings are read.
  CHIMERA_REQUIRE(H5Tis_variable_str(stored.get()) == 0,
                  "{}: attribute '{}' is a variable-length string; Chimera reads fixed-length "
                  "strings only (in h5py: attrs['{}'] = numpy.bytes_(text))",
                  context, name, name);
  const std::size_t size = H5Tget_size(stored.get());
  CHIMERA_REQUIRE(size > 0 && size < (std::size_t{1} << 30),
                  "{}: attribute '{}' has an invalid string size {}", context, name, size);
  Handle type = datatype_handle(H5_CHECK(H5Tcopy(H5T_C_S1), "string type"));
  H5_CHECK(H5Tset_size(type.get(), size));
  H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  // HDF5 converts between ASCII and UTF-8 strings no more than between strings and numbers.
  H5_CHECK(H5Tset_cset(type.get(), H5Tget_cset(stored.get())));
  std::string value(size, '\0');
  CHIMERA_REQUIRE(H5Aread(attribute.get(), type.get(), value.data()) >= 0,
                  "{}: attribute '{}' cannot be read (HDF5: {})", context, name,
                  library_error_message());
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
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
    case H5T_FLOAT:
      return fmt::format("float{}", bits);
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
