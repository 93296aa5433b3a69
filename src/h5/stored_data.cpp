#include "chimera/h5/stored_data.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <vector>

#include "chimera/h5/check.hpp"
#include "chimera/h5/handle.hpp"

namespace chimera::h5 {

namespace {

// Names of registered third-party filters h5py users meet, for files that store no name.
const char* known_filter_name(H5Z_filter_t id) {
  switch (id) {
    case 32000:
      return "lzf";
    case 32001:
      return "blosc";
    case 32004:
      return "lz4";
    case 32008:
      return "bitshuffle";
    case 32015:
      return "zstd";
    case 32026:
      return "blosc2";
    default:
      return "";
  }
}

bool can_decode(H5Z_filter_t id) {
  // H5Zfilter_avail may look for a plugin (and fail with an error on the stack): not available.
  if (H5Zfilter_avail(id) <= 0) return false;
  unsigned config = 0;
  return H5Zget_filter_info(id, &config) >= 0 && (config & H5Z_FILTER_CONFIG_DECODE_ENABLED) != 0;
}

std::optional<std::string> filter_problem(hid_t create) {
  const int filters = H5Pget_nfilters(create);
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, filter_config = 0;
    std::size_t values = 0;
    std::array<char, 256> name{};
    const H5Z_filter_t id = H5Pget_filter2(create, static_cast<unsigned>(i), &flags, &values,
                                           nullptr, name.size(), name.data(), &filter_config);
    if (id < 0) return "has a filter pipeline this HDF5 cannot read: rewrite it uncompressed";
    if (can_decode(id)) continue;
    std::string shown = name[0] != '\0' ? std::string(name.data()) : known_filter_name(id);
    if (shown.empty()) shown = "unknown";
    return fmt::format(
        "is compressed with filter '{}' (id {}), which this HDF5 cannot decode: rewrite it "
        "uncompressed or with compression='gzip'",
        shown, id);
  }
  return std::nullopt;
}

// A failed query of a dataset's own metadata (a damaged file, not a bug): what was asked, and
// HDF5's message, taken before handles close and clear HDF5's error stack.
struct DamagedMetadata {
  std::string what;
  std::string library;
};

template <typename Result>
Result query(Result result, const char* what) {
  if (static_cast<long long>(result) < 0) throw DamagedMetadata{what, library_error_message()};
  return result;
}

// The dataset's storage problem; a query of its metadata that fails throws DamagedMetadata.
std::optional<std::string> storage_problem(hid_t dataset) {
  Handle create = plist_handle(query(H5Dget_create_plist(dataset), "creation properties"));
  if (auto problem = filter_problem(create.get())) return problem;

  Handle space = dataspace_handle(query(H5Dget_space(dataset), "dataspace"));
  const int rank = query(H5Sget_simple_extent_ndims(space.get()), "rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) query(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "shape");
  const hssize_t elements = query(H5Sget_simple_extent_npoints(space.get()), "number of elements");
  if (elements == 0) return std::nullopt;

  const H5D_layout_t layout = query(H5Pget_layout(create.get()), "storage layout");
  if (layout == H5D_COMPACT) return std::nullopt;
  H5D_space_status_t status{};
  query(H5Dget_space_status(dataset, &status), "storage status");
  constexpr const char* kNeverWritten =
      "was created but never written (no data stored), so it would read as zeros: write its "
      "values";
  if (status == H5D_SPACE_STATUS_NOT_ALLOCATED || H5Dget_storage_size(dataset) == 0)
    return std::string(kNeverWritten);
  if (layout != H5D_CHUNKED) return std::nullopt;

  std::vector<hsize_t> chunk(dims.size());
  query(H5Pget_chunk(create.get(), rank, chunk.data()), "chunk shape");
  hsize_t expected = 1;
  for (std::size_t d = 0; d < dims.size(); ++d)
    expected *= chunk[d] == 0 ? 0 : (dims[d] + chunk[d] - 1) / chunk[d];
  hsize_t stored = 0;
  query(H5Dget_num_chunks(dataset, space.get(), &stored), "chunk index");
  if (stored == 0) return std::string(kNeverWritten);
  if (stored < expected)
    return fmt::format(
        "was only partly written: {} of its {} chunks hold data (the rest would read as zeros): "
        "write all its values",
        stored, expected);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> stored_data_problem(hid_t dataset) {
  try {
    return storage_problem(dataset);
  } catch (const DamagedMetadata& damaged) {
    return fmt::format("cannot be read: its {} is damaged in the file (HDF5: {}); rewrite the file",
                       damaged.what, damaged.library);
  }
}

}  // namespace chimera::h5
