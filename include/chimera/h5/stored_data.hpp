#pragma once
// Whether a dataset's values can be read as they were written, from its metadata alone (no value
// is read). Shared by the token dataset reader (module data) and checkpoint reader (module io).
#include <hdf5.h>

#include <optional>
#include <string>

namespace chimera::h5 {

// nullopt when the dataset's values can be read; otherwise what is wrong, as the end of a sentence
// that starts with the dataset's name, e.g. "is compressed with filter 'lzf' (id 32000), which
// this HDF5 cannot decode: rewrite it uncompressed or with compression='gzip'". Refused:
//  - a filter this HDF5 cannot decode (h5py's own lzf, or blosc, bitshuffle, ... plugins);
//  - a non-empty dataset that was created but never written: HDF5 would read its fill value
//    (zeros) as if it were data;
//  - a chunked dataset where only some chunks hold data (the rest would read as fill values).
//  - metadata of the dataset that HDF5 cannot read (a damaged file): "cannot be read: its
//    dataspace is damaged in the file (HDF5: ...); rewrite the file".
// Compact datasets always hold their data. Cheap: reads the creation properties and the chunk
// index, never a value.
std::optional<std::string> stored_data_problem(hid_t dataset);

}  // namespace chimera::h5
