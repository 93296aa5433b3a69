#include "chimera/data/dataset_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"

namespace chimera::data {

namespace {
// Tokens are buffered and written a chunk-multiple at a time.
constexpr std::size_t kFlushTokens = std::size_t{1} << 20;

// A write that fails is the file system's doing (a full disk, a quota, a lost mount), not a bug:
// one line naming the file and the system's reason.
[[noreturn]] void fail_write(const std::string& path, int error) {
  std::string why = error != 0 ? std::strerror(error) : h5::library_error_message();
  std::replace(why.begin(), why.end(), '\n', ' ');  // HDF5's messages may span lines
  throw InputError(fmt::format("{}: cannot write the token dataset: {}", path, why));
}
}  // namespace

TokenDatasetWriter::TokenDatasetWriter(std::string path, int vocab_size, std::int32_t eos_token,
                                       const std::string& tokenizer, std::int64_t chunk_tokens)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp"),
      vocab_size_(vocab_size),
      file_type_(vocab_size <= kMaxUint16Vocab ? H5T_STD_U16LE : H5T_STD_I32LE) {
  CHIMERA_CHECK(vocab_size > 0 && eos_token >= 0 && eos_token < vocab_size,
                "vocab_size {} and eos_token {}", vocab_size, eos_token);
  CHIMERA_CHECK(chunk_tokens > 0, "chunk of {} tokens", chunk_tokens);
  file_ = h5::create_file(temp_path_);
  const hsize_t initial = 0, unlimited = H5S_UNLIMITED, chunk = static_cast<hsize_t>(chunk_tokens);
  h5::Handle space = h5::dataspace_handle(H5_CHECK(H5Screate_simple(1, &initial, &unlimited)));
  h5::Handle create = h5::plist_handle(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_chunk(create.get(), 1, &chunk));
  // No creation/modification times in the object header: the same tokens give the same bytes.
  H5_CHECK(H5Pset_obj_track_times(create.get(), false));
  dataset_ =
      h5::dataset_handle(H5_CHECK(H5Dcreate2(file_.get(), kTokensDataset, file_type_, space.get(),
                                             H5P_DEFAULT, create.get(), H5P_DEFAULT),
                                  "creating /tokens in {}", temp_path_));
  h5::write_int_attribute(file_.get(), kVocabSizeAttribute, vocab_size);
  h5::write_int_attribute(file_.get(), kEosTokenAttribute, eos_token);
  h5::write_string_attribute(file_.get(), kTokenizerAttribute, tokenizer);
  pending_.reserve(kFlushTokens);
}

TokenDatasetWriter::~TokenDatasetWriter() {
  if (!finished_) {
    dataset_.reset();
    file_.reset();
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void TokenDatasetWriter::append(std::span<const std::int32_t> tokens) {
  for (const std::int32_t token : tokens) {
    CHIMERA_CHECK(token >= 0 && token < vocab_size_, "token {} outside [0, {})", token,
                  vocab_size_);
    pending_.push_back(token);
    if (pending_.size() >= kFlushTokens) flush();
  }
}

void TokenDatasetWriter::flush() {
  if (pending_.empty()) return;
  const hsize_t start = static_cast<hsize_t>(written_), count = pending_.size();
  const hsize_t new_size = start + count;
  errno = 0;
  if (H5Dset_extent(dataset_.get(), &new_size) < 0) fail_write(temp_path_, errno);
  h5::Handle file_space = h5::dataspace_handle(H5_CHECK(H5Dget_space(dataset_.get())));
  H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
  h5::Handle memory_space = h5::dataspace_handle(H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  if (H5Dwrite(dataset_.get(), H5T_NATIVE_INT32, memory_space.get(), file_space.get(), H5P_DEFAULT,
               pending_.data()) < 0)
    fail_write(temp_path_, errno);
  written_ += static_cast<std::int64_t>(count);
  pending_.clear();
}

void TokenDatasetWriter::finish() {
  CHIMERA_CHECK(!finished_, "{} finished twice", path_);
  flush();
  errno = 0;
  if (dataset_.close() < 0 || file_.close() < 0) fail_write(temp_path_, errno);
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  CHIMERA_REQUIRE(!ec, "cannot rename {} to {}: {}", temp_path_, path_, ec.message());
  finished_ = true;
}

}  // namespace chimera::data
