#pragma once
// Small typed helpers over the HDF5 C API, shared by the dataset reader/writer (module data) and
// checkpoints (module io). Functions that read a file given by the user report problems with it
// as chimera::InputError naming the file and what was expected; HDF5 failures that cannot be the
// user's fault go through H5_CHECK.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chimera/h5/handle.hpp"

namespace chimera::h5 {

// Opens an existing HDF5 file read-only. InputError (naming `path` and `what` it should be, e.g.
// "token dataset") when the file is missing, unreadable, not HDF5, or damaged (truncated).
Handle open_file_read(const std::string& path, const std::string& what);

// Creates (truncates) a file for writing with the given file-access property list (H5P_DEFAULT
// for the serial driver). InputError naming the path when it cannot be created.
Handle create_file(const std::string& path, hid_t file_access = H5P_DEFAULT);

bool has_link(hid_t location, const std::string& path);
bool has_attribute(hid_t object, const std::string& name);

// Scalar attributes (one value: a scalar or a 1-element array), as h5py, h5netcdf or the HDF5 C
// API write them. Readers throw InputError naming `context` (the file) when the attribute is
// missing or holds something else.
//  - An integer reads from an integer of any width and sign that fits int64, or from a string
//    holding a decimal integer ("50257").
//  - A string reads from a fixed-length string (any padding, ASCII or UTF-8), a variable-length
//    string (what h5py writes for a Python str; read without libhdf5's global-heap code, see
//    docs/data.md "Known limits"), or an integer (its decimal text).
void write_int_attribute(hid_t object, const std::string& name, std::int64_t value);
std::int64_t read_int_attribute(hid_t object, const std::string& name, const std::string& context);
// Strings are written fixed-length UTF-8 (h5py reads them as bytes; `.decode()` gives str).
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
std::string read_string_attribute(hid_t object, const std::string& name,
                                  const std::string& context);
// The same, nullopt when the attribute is absent.
std::optional<std::int64_t> read_optional_int_attribute(hid_t object, const std::string& name,
                                                        const std::string& context);
std::optional<std::string> read_optional_string_attribute(hid_t object, const std::string& name,
                                                          const std::string& context);

// Dimensions of a dataset's dataspace (empty for a scalar).
std::vector<std::int64_t> dataset_shape(hid_t dataset);

// "uint16", "int32", "float16", "bfloat16", "float32", "float64", "string", ... for messages and
// `chimera inspect`.
std::string describe_type(hid_t datatype);

// "[768, 2304]"
std::string format_shape(const std::vector<std::int64_t>& shape);

}  // namespace chimera::h5
