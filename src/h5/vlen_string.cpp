#include "vlen_string.hpp"

#include <array>
#include <cstring>
#include <fstream>
#include <vector>

#include "chimera/h5/check.hpp"
#include "chimera/h5/handle.hpp"

namespace chimera::h5 {

namespace {

// The opaque memory type whose conversion from a variable-length string is registered below.
constexpr const char* kStoredReferenceTag = "chimera: stored variable-length string reference";

// A soft conversion from variable-length strings to the opaque type tagged above, and to no other
// type. It keeps the attribute's stored bytes as they are: H5Aread then copies the reference
// stored in the object header and never dereferences it in the global heap.
herr_t keep_stored_reference(hid_t source, hid_t destination, H5T_cdata_t* cdata, size_t, size_t,
                             size_t, void*, void*, hid_t) {
  switch (cdata->command) {
    case H5T_CONV_INIT: {
      if (H5Tis_variable_str(source) <= 0 || H5Tget_class(destination) != H5T_OPAQUE) return -1;
      char* tag = H5Tget_tag(destination);
      const bool ours = tag != nullptr && std::strcmp(tag, kStoredReferenceTag) == 0;
      H5free_memory(tag);
      cdata->need_bkg = H5T_BKG_NO;
      return ours ? 0 : -1;
    }
    case H5T_CONV_CONV:
      // Same size: the stored bytes are the result. Another size is a reference of another
      // layout than the one asked for; the read fails and is reported.
      return H5Tget_size(source) == H5Tget_size(destination) ? 0 : -1;
    case H5T_CONV_FREE:
      return 0;
    default:
      return -1;
  }
}

Handle stored_reference_type(std::size_t bytes) {
  Handle type = datatype_handle(H5_CHECK(H5Tcreate(H5T_OPAQUE, bytes), "opaque type"));
  H5_CHECK(H5Tset_tag(type.get(), kStoredReferenceTag));
  return type;
}

void register_stored_reference_conversion() {
  static const bool registered = [] {
    Handle vlen = datatype_handle(H5_CHECK(H5Tcopy(H5T_C_S1), "string type"));
    H5_CHECK(H5Tset_size(vlen.get(), H5T_VARIABLE));
    const Handle reference = stored_reference_type(16);
    H5_CHECK(H5Tregister(H5T_PERS_SOFT, "chimera_stored_vlen_reference", vlen.get(),
                         reference.get(), keep_stored_reference),
             "registering the variable-length string reference conversion");
    return true;
  }();
  (void)registered;
}

// HDF5 encodes addresses, lengths and indices little-endian.
std::uint64_t little_endian(const unsigned char* bytes, std::size_t n) {
  std::uint64_t value = 0;
  for (std::size_t i = n; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

struct FileLayout {
  std::string path;
  std::size_t sizeof_addr = 8;  // bytes of a file address
  std::size_t sizeof_size = 8;  // bytes of a length
  std::uint64_t base = 0;       // addresses count from the end of the user block
};

FileLayout file_layout(hid_t attribute) {
  FileLayout layout;
  Handle file = file_handle(H5_CHECK(H5Iget_file_id(attribute), "file of an attribute"));
  const ssize_t length = H5_CHECK(H5Fget_name(file.get(), nullptr, 0), "file name");
  layout.path.resize(static_cast<std::size_t>(length) + 1);
  H5_CHECK(H5Fget_name(file.get(), layout.path.data(), layout.path.size()), "file name");
  layout.path.resize(static_cast<std::size_t>(length));
  Handle create = plist_handle(H5_CHECK(H5Fget_create_plist(file.get()), "file creation list"));
  H5_CHECK(H5Pget_sizes(create.get(), &layout.sizeof_addr, &layout.sizeof_size));
  hsize_t user_block = 0;
  H5_CHECK(H5Pget_userblock(create.get(), &user_block));
  layout.base = user_block;
  return layout;
}

// Reads `count` bytes at `offset` of `in`, whose size is `file_size`; false when out of range.
bool read_at(std::ifstream& in, std::uint64_t file_size, std::uint64_t offset, std::size_t count,
             unsigned char* out) {
  if (offset > file_size || count > file_size - offset) return false;
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count));
  return in.good();
}

}  // namespace

std::string read_vlen_string_attribute(hid_t attribute, const std::string& name,
                                       const std::string& context) {
  const auto damaged = [&](const std::string& why) {
    return InputError(fmt::format("{}: attribute '{}' (a variable-length string) is damaged: {}",
                                  context, name, why));
  };
  register_stored_reference_conversion();
  const FileLayout layout = file_layout(attribute);
  // The stored reference: sequence length (4 bytes), heap collection address, object index (4).
  const std::size_t reference_bytes = 4 + layout.sizeof_addr + 4;
  if (H5Aget_storage_size(attribute) != reference_bytes)
    throw damaged(fmt::format("it stores {} bytes, a string reference takes {}",
                              H5Aget_storage_size(attribute), reference_bytes));
  std::vector<unsigned char> reference(reference_bytes);
  const Handle reference_type = stored_reference_type(reference_bytes);
  if (H5Aread(attribute, reference_type.get(), reference.data()) < 0)
    throw damaged(fmt::format("its reference cannot be read (HDF5: {})", library_error_message()));
  const std::uint64_t length = little_endian(reference.data(), 4);
  const std::uint64_t collection = little_endian(reference.data() + 4, layout.sizeof_addr);
  const std::uint64_t index = little_endian(reference.data() + 4 + layout.sizeof_addr, 4);
  if (length == 0) return {};
  if (length > kMaxStringAttributeBytes)
    throw InputError(
        fmt::format("{}: attribute '{}' claims {} bytes, more than the {} a string "
                    "attribute may hold; the file is damaged",
                    context, name, length, kMaxStringAttributeBytes));

  std::ifstream in(layout.path, std::ios::binary);
  if (!in.good()) throw damaged(fmt::format("{} cannot be reopened to read it", layout.path));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  // Global heap collection: "GCOL", version 1, 3 reserved bytes, collection size; then objects,
  // each: index (2 bytes), reference count (2), reserved (4), size, data padded to 8 bytes.
  // Object index 0 is the free space at the end.
  const std::size_t header_bytes = 8 + layout.sizeof_size;
  const std::size_t object_header_bytes = 8 + layout.sizeof_size;
  if (collection > file_size - std::min(file_size, layout.base))
    throw damaged(fmt::format("its heap address {} is beyond the file's end", collection));
  const std::uint64_t start = layout.base + collection;
  std::array<unsigned char, 8 + 16> header{};
  if (layout.sizeof_size > 16 || !read_at(in, file_size, start, header_bytes, header.data()))
    throw damaged("its heap collection header is beyond the file's end");
  if (std::memcmp(header.data(), "GCOL", 4) != 0 || header[4] != 1)
    throw damaged(fmt::format("no global heap collection at address {}", collection));
  const std::uint64_t collection_size = little_endian(header.data() + 8, layout.sizeof_size);
  if (collection_size < header_bytes || collection_size > file_size - start)
    throw damaged(fmt::format("its heap collection claims {} bytes", collection_size));
  if (index == 0) throw damaged("it names heap object 0 (free space)");

  std::uint64_t offset = header_bytes;
  while (offset + object_header_bytes <= collection_size) {
    std::array<unsigned char, 8 + 16> object{};
    if (!read_at(in, file_size, start + offset, object_header_bytes, object.data()))
      throw damaged("a heap object is beyond the file's end");
    const std::uint64_t object_index = little_endian(object.data(), 2);
    const std::uint64_t object_size = little_endian(object.data() + 8, layout.sizeof_size);
    const std::uint64_t data_begin = offset + object_header_bytes;
    if (object_index == 0) break;
    if (object_size > collection_size - data_begin)
      throw damaged(fmt::format("heap object {} claims {} bytes, more than its collection holds",
                                object_index, object_size));
    if (object_index == index) {
      if (object_size < length)
        throw damaged(fmt::format("it claims {} bytes but heap object {} holds {}", length, index,
                                  object_size));
      std::string value(static_cast<std::size_t>(length), '\0');
      if (!read_at(in, file_size, start + data_begin, value.size(),
                   reinterpret_cast<unsigned char*>(value.data())))
        throw damaged("its heap object is beyond the file's end");
      return value;
    }
    offset = data_begin + (object_size + 7) / 8 * 8;
  }
  throw damaged(fmt::format("heap object {} is not in its collection", index));
}

}  // namespace chimera::h5
