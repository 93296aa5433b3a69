// Scalar attributes as other tools write them: integers of any width, strings fixed-length or
// variable-length, and numbers stored as text (see file.hpp).
#include <algorithm>
#include <charconv>

#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "vlen_string.hpp"

namespace chimera::h5 {

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

Handle attribute_type(hid_t attribute, const std::string& name, const std::string& context) {
  Handle type = datatype_handle(H5Aget_type(attribute));
  CHIMERA_REQUIRE(type.valid(), "{}: attribute '{}' has an unreadable type (HDF5: {})", context,
                  name, library_error_message());
  return type;
}

std::int64_t read_integer(hid_t attribute, hid_t stored, const std::string& name,
                          const std::string& context) {
  CHIMERA_REQUIRE(H5Tget_size(stored) <= 8,
                  "{}: attribute '{}' is a {}-byte integer, wider than 64 bits", context, name,
                  H5Tget_size(stored));
  // Unsigned values are read as uint64 so that one above INT64_MAX is reported, not clipped.
  if (H5Tget_sign(stored) == H5T_SGN_NONE) {
    std::uint64_t value = 0;
    CHIMERA_REQUIRE(H5Aread(attribute, H5T_NATIVE_UINT64, &value) >= 0,
                    "{}: attribute '{}' cannot be read as an integer (HDF5: {})", context, name,
                    library_error_message());
    CHIMERA_REQUIRE(value <= static_cast<std::uint64_t>(INT64_MAX),
                    "{}: attribute '{}' = {} does not fit a signed 64-bit integer", context, name,
                    value);
    return static_cast<std::int64_t>(value);
  }
  std::int64_t value = 0;
  CHIMERA_REQUIRE(H5Aread(attribute, H5T_NATIVE_INT64, &value) >= 0,
                  "{}: attribute '{}' cannot be read as an integer (HDF5: {})", context, name,
                  library_error_message());
  return value;
}

std::string read_text(hid_t attribute, hid_t stored, const std::string& name,
                      const std::string& context) {
  if (H5Tis_variable_str(stored) > 0) return read_vlen_string_attribute(attribute, name, context);
  const std::size_t size = H5Tget_size(stored);
  CHIMERA_REQUIRE(size > 0 && size <= kMaxStringAttributeBytes,
                  "{}: attribute '{}' has an invalid string size {}", context, name, size);
  Handle type = datatype_handle(H5_CHECK(H5Tcopy(H5T_C_S1), "string type"));
  H5_CHECK(H5Tset_size(type.get(), size));
  // Null-padded in memory: HDF5 strips a space-padded string's padding on the way.
  H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  // HDF5 converts between ASCII and UTF-8 strings no more than between strings and numbers.
  H5_CHECK(H5Tset_cset(type.get(), H5Tget_cset(stored)));
  std::string value(size, '\0');
  CHIMERA_REQUIRE(H5Aread(attribute, type.get(), value.data()) >= 0,
                  "{}: attribute '{}' cannot be read (HDF5: {})", context, name,
                  library_error_message());
  value.resize(std::min(value.find('\0'), size));
  return value;
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
  Handle stored = attribute_type(attribute.get(), name, context);
  switch (H5Tget_class(stored.get())) {
    case H5T_INTEGER:
      return read_integer(attribute.get(), stored.get(), name, context);
    case H5T_STRING: {
      const std::string text = read_text(attribute.get(), stored.get(), name, context);
      const auto first = text.find_first_not_of(" \t\n");
      const auto last = text.find_last_not_of(" \t\n");
      std::int64_t value = 0;
      const char* begin = text.data() + (first == std::string::npos ? text.size() : first);
      const char* end = text.data() + (last == std::string::npos ? 0 : last + 1);
      const auto [ptr, ec] = std::from_chars(begin, std::max(begin, end), value);
      CHIMERA_REQUIRE(ec == std::errc() && ptr == end && begin < end,
                      "{}: attribute '{}' is the string \"{}\", expected an integer", context, name,
                      text.substr(0, 64));
      return value;
    }
    default:
      throw InputError(fmt::format("{}: attribute '{}' must be an integer, found {}", context, name,
                                   describe_type(stored.get())));
  }
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  // Fixed-length: what every HDF5 reader reads without its global heap (see vlen_string.hpp).
  // HDF5 sizes must be positive, so "" takes one NUL.
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
  Handle stored = attribute_type(attribute.get(), name, context);
  switch (H5Tget_class(stored.get())) {
    case H5T_STRING:
      return read_text(attribute.get(), stored.get(), name, context);
    case H5T_INTEGER:
      return std::to_string(read_integer(attribute.get(), stored.get(), name, context));
    default:
      throw InputError(fmt::format("{}: attribute '{}' must be a string, found {}", context, name,
                                   describe_type(stored.get())));
  }
}

std::optional<std::int64_t> read_optional_int_attribute(hid_t object, const std::string& name,
                                                        const std::string& context) {
  if (!has_attribute(object, name)) return std::nullopt;
  return read_int_attribute(object, name, context);
}

std::optional<std::string> read_optional_string_attribute(hid_t object, const std::string& name,
                                                          const std::string& context) {
  if (!has_attribute(object, name)) return std::nullopt;
  return read_string_attribute(object, name, context);
}

}  // namespace chimera::h5
