#pragma once
// Reading a variable-length string attribute without libhdf5's global-heap code. HDF5 1.10 reads
// such strings through H5HG_read, which trusts the lengths a damaged file claims (out-of-bounds
// copies and allocations of whatever size, found by fuzz/fuzz_checkpoint). Here HDF5 only hands
// over the attribute's stored reference (length, heap collection address, object index); the
// heap collection is read from the file with plain I/O and every size is checked against the
// file before a byte is copied.
#include <hdf5.h>

#include <string>

namespace chimera::h5 {

// The longest variable-length string attribute read (a config's TOML text is a few KiB).
inline constexpr std::size_t kMaxStringAttributeBytes = std::size_t{16} << 20;

// `attribute` is an open attribute holding one variable-length string. InputError naming
// `context` and `name` when its reference or the heap it points into is damaged.
std::string read_vlen_string_attribute(hid_t attribute, const std::string& name,
                                       const std::string& context);

}  // namespace chimera::h5
