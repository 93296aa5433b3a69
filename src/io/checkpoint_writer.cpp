// Writing checkpoints: one file collectively through parallel HDF5, and the crash-safe directory
// protocol (temporary name, fsync, rename, `latest` pointer, pruning) around it.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/io/checkpoint.hpp"
#include "collective.hpp"

namespace chimera::io {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLatestPointer = "latest";
constexpr const char* kTempSuffix = ".tmp";
// Tensors are written in slabs of at most this many bytes: MPI-IO counts are 32-bit ints.
constexpr std::int64_t kMaxSlabBytes = std::int64_t{1} << 30;

std::uint64_t tensor_list_fingerprint(std::span<const TensorData> tensors) {
  std::string text;
  for (const auto& t : tensors)
    text += fmt::format("{}{};", t.spec.name, h5::format_shape(t.spec.shape));
  return fnv1a64(text);
}

h5::Handle tensor_space(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return h5::dataspace_handle(H5_CHECK(H5Screate(H5S_SCALAR)));
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  return h5::dataspace_handle(
      H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
}

// "<what> failed: <the system's reason> (HDF5: ...)" for a failed HDF5 write, flush or close of
// `path`. HDF5's MPI-IO driver reports only "file write failed"; the errno of the failing system
// call (`error`, read right after the call) carries the reason, and a file system that is full
// says so through statvfs even where that errno was lost.
std::string failed_io(const std::string& what, int error, const std::string& path) {
  struct statvfs fs_state {};
  const std::string dir = fs::path(path).parent_path().string();
  if (error == 0 && ::statvfs(dir.empty() ? "." : dir.c_str(), &fs_state) == 0 &&
      fs_state.f_bavail == 0)
    error = ENOSPC;
  return fmt::format("{} failed{}{} (HDF5: {})", what, error != 0 ? ": " : "",
                     error != 0 ? std::strerror(error) : "", h5::library_error_message());
}

// Writes `elements` floats from `data` into the hyperslab [start, start + count) of `dataset`
// (`file_space` is its dataspace). Returns "" or, naming `what`, what failed.
std::string write_slab(hid_t dataset, hid_t file_space, const std::vector<hsize_t>& start,
                       const std::vector<hsize_t>& count, const float* data, hsize_t elements,
                       hid_t transfer, const std::string& what, const std::string& path) {
  H5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(),
                               nullptr));
  h5::Handle memory_space = h5::dataspace_handle(H5_CHECK(H5Screate_simple(1, &elements, nullptr)));
  errno = 0;
  if (H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space, transfer, data) < 0)
    return failed_io(what, errno, path);
  return {};
}

// Writes a part of a tensor, elements [first, first + data.size()) of it flattened, as at most
// three hyperslabs of its [rows, row] view: the rest of a first partial row, whole rows, the
// start of a last partial row. Returns "" or what failed.
std::string write_part(hid_t dataset, const TensorData& t, hid_t transfer,
                       const std::string& path) {
  const auto& shape = t.spec.shape;
  const std::int64_t row = shape.size() <= 1 ? t.spec.numel() : shape.back();
  const std::int64_t end = t.first + static_cast<std::int64_t>(t.data.size());
  h5::Handle file_space = h5::dataspace_handle(H5_CHECK(H5Dget_space(dataset)));
  for (std::int64_t at = t.first; at < end;) {
    const std::int64_t r = at / row, c = at % row;
    // A partial row, or as many whole rows as remain.
    const std::int64_t rows = c != 0 || end - at < row ? 1 : (end - at) / row;
    const std::int64_t cols = rows == 1 ? std::min(row - c, end - at) : row;
    CHIMERA_CHECK(shape.size() <= 2 || (c == 0 && cols == row),
                  "a part of tensor '{}' splits a row of its {} dimensions", t.spec.name,
                  shape.size());
    // Start and count over the dataset's dimensions: [r, c] of the [rows, row] view.
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    if (shape.size() == 1) {
      start[0] = static_cast<hsize_t>(c);
      count[0] = static_cast<hsize_t>(cols);
    } else {
      start[0] = static_cast<hsize_t>(r);
      count[0] = static_cast<hsize_t>(rows);
      if (shape.size() == 2) {
        start[1] = static_cast<hsize_t>(c);
        count[1] = static_cast<hsize_t>(cols);
      }
    }
    const std::string failed = write_slab(
        dataset, file_space.get(), start, count, t.data.data() + (at - t.first),
        static_cast<hsize_t>(rows * cols), transfer,
        fmt::format("writing elements [{}, {}) of tensor '{}'", at, at + rows * cols, t.spec.name),
        path);
    if (!failed.empty()) return failed;
    at += rows * cols;
  }
  return {};
}

// Writes `data` into `dataset` in slabs of whole rows of the first dimension. Returns "" or
// what failed (the caller agrees on failures with the other ranks before throwing).
std::string write_tensor(hid_t dataset, const TensorData& t, hid_t transfer,
                         const std::string& path) {
  const auto& shape = t.spec.shape;
  if (t.first != 0 || static_cast<std::int64_t>(t.data.size()) != t.spec.numel())
    return write_part(dataset, t, transfer, path);
  if (shape.empty() || t.spec.numel() * 4 <= kMaxSlabBytes) {
    errno = 0;
    if (H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, transfer, t.data.data()) < 0)
      return failed_io(fmt::format("writing tensor '{}'", t.spec.name), errno, path);
    return {};
  }
  const std::int64_t row = t.spec.numel() / shape[0];
  const std::int64_t rows_per_slab = std::max<std::int64_t>(1, kMaxSlabBytes / (row * 4));
  h5::Handle file_space = h5::dataspace_handle(H5_CHECK(H5Dget_space(dataset)));
  for (std::int64_t begin = 0; begin < shape[0]; begin += rows_per_slab) {
    const std::int64_t rows = std::min(rows_per_slab, shape[0] - begin);
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    start[0] = static_cast<hsize_t>(begin);
    count[0] = static_cast<hsize_t>(rows);
    const std::string failed = write_slab(
        dataset, file_space.get(), start, count, t.data.data() + begin * row,
        static_cast<hsize_t>(rows * row), transfer,
        fmt::format("writing rows [{}, {}) of tensor '{}'", begin, begin + rows, t.spec.name),
        path);
    if (!failed.empty()) return failed;
  }
  return {};
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  CHIMERA_CHECK(fd >= 0, "cannot open {} to flush it to disk: {}", path, std::strerror(errno));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  CHIMERA_CHECK(status == 0, "fsync of {} failed: {}", path, std::strerror(error));
}

void rename_durably(const std::string& from, const std::string& to, const std::string& dir) {
  fsync_path(from, false);
  std::error_code ec;
  fs::rename(from, to, ec);
  CHIMERA_CHECK(!ec, "cannot rename {} to {}: {}", from, to, ec.message());
  fsync_path(dir, true);
}

// The size of a checkpoint file: its tensors, and HDF5's metadata (an object header of at
// most this many bytes per dataset, plus the attributes).
constexpr std::int64_t kMetadataBytesPerTensor = 1024;
std::int64_t checkpoint_bytes(std::span<const TensorData> tensors, const CheckpointMeta& meta) {
  std::int64_t bytes = static_cast<std::int64_t>(meta.config.size());
  for (const auto& t : tensors)
    bytes += t.spec.numel() * static_cast<std::int64_t>(sizeof(float)) + kMetadataBytesPerTensor;
  return bytes;
}

// Bytes an unprivileged writer may still use on the file system holding `dir`.
std::int64_t free_space(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
}

// Allocates the blocks of `path`'s first `bytes` (Linux fallocate, keeping its contents and
// size, so that HDF5 sees the file it wrote); "" when done or when the file system cannot (then
// writes allocate as they go), else what failed with the system's reason.
std::string reserve_blocks(const std::string& path, off_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0)
    return fmt::format("cannot open {} to reserve its space: {}", path, std::strerror(errno));
  const int status = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, bytes);
  const int error = errno;
  ::close(fd);
  if (status == 0 || error == EOPNOTSUPP || error == ENOSYS) return {};
  return fmt::format("cannot reserve {:.1f} MB for {}: {}", static_cast<double>(bytes) / 1e6, path,
                     std::strerror(error));
}

// The step of a final checkpoint name "ckpt-<digits>.h5", or nullopt for any other name.
std::optional<std::int64_t> step_of_checkpoint_name(std::string_view name) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".h5";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  std::int64_t step = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace

std::int64_t TensorSpec::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

std::string exp_avg_name(std::string_view tensor) {
  return fmt::format("optim/exp_avg/{}", tensor);
}
std::string exp_avg_sq_name(std::string_view tensor) {
  return fmt::format("optim/exp_avg_sq/{}", tensor);
}
bool is_optimizer_state(std::string_view name) {
  return name.starts_with("optim/");
}

namespace {

// The file's attributes (rank 0's meta) and every tensor's dataset: contiguous, allocated at
// creation, never filled.
std::vector<h5::Handle> create_datasets(hid_t root, const std::string& path,
                                        std::span<const TensorData> tensors,
                                        const CheckpointMeta& shared) {
  h5::write_string_attribute(root, "format", kCheckpointFormat);
  h5::write_int_attribute(root, "format_version", kCheckpointFormatVersion);
  h5::write_int_attribute(root, "step", shared.step);
  h5::write_int_attribute(root, "seed", shared.seed);
  h5::write_int_attribute(root, "data_cursor", shared.data_cursor);
  h5::write_int_attribute(root, "skipped_steps", shared.skipped_steps);
  h5::write_string_attribute(root, "config", shared.config);

  h5::Handle link_create = h5::plist_handle(H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  H5_CHECK(H5Pset_create_intermediate_group(link_create.get(), 1));
  h5::Handle dataset_create = h5::plist_handle(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  // Every value is written: no fill pass. Early allocation is what parallel HDF5 requires.
  H5_CHECK(H5Pset_fill_time(dataset_create.get(), H5D_FILL_TIME_NEVER));
  H5_CHECK(H5Pset_alloc_time(dataset_create.get(), H5D_ALLOC_TIME_EARLY));
  std::vector<h5::Handle> datasets;
  datasets.reserve(tensors.size());
  for (const auto& t : tensors) {
    h5::Handle space = tensor_space(t.spec.shape);
    datasets.push_back(h5::dataset_handle(
        H5_CHECK(H5Dcreate2(root, t.spec.name.c_str(), H5T_IEEE_F32LE, space.get(),
                            link_create.get(), dataset_create.get(), H5P_DEFAULT),
                 "creating tensor '{}' in {}", t.spec.name, path)));
  }
  return datasets;
}

// Space is allocated at creation and metadata goes out at flush and close: a full disk may
// surface only there. Returns `failure`, or the first failure of these.
std::string close_file(h5::Handle& file, std::vector<h5::Handle>& datasets, const std::string& path,
                       std::string failure) {
  for (auto& dataset : datasets) dataset.reset();  // in a parallel file: the same order everywhere
  errno = 0;
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0 && failure.empty())
    failure = failed_io("flushing the file", errno, path);
  errno = 0;
  if (file.close() < 0 && failure.empty()) failure = failed_io("closing the file", errno, path);
  return failure;
}

// An asynchronous save's file, without its values: rank 0 alone creates it (HDF5's default
// driver), reserves its blocks and tells every rank where each tensor's bytes go; each rank
// returns its pieces for write_raw_pieces. No rank waits inside parallel HDF5, whose
// collectives no watchdog can watch: a peer lost meanwhile leaves the others in this code's own
// agreements and broadcasts, which a runtime watches (set_collective_wait) and names it from.
std::vector<RawPiece> create_on_rank_0(const detail::Collective& group, const std::string& path,
                                       std::span<const TensorData> tensors,
                                       const CheckpointMeta& shared) {
  std::vector<std::int64_t> offsets(tensors.size(), 0);
  std::string failure;
  bool input_error = false;
  if (group.rank() == 0) {
    try {
      h5::Handle file = h5::create_file(path, H5P_DEFAULT);
      std::vector<h5::Handle> datasets = create_datasets(file.get(), path, tensors, shared);
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        // Contiguous, allocated at creation, never filled: the values' bytes lie at one offset.
        const haddr_t offset = H5Dget_offset(datasets[i].get());
        CHIMERA_CHECK(offset != HADDR_UNDEF, "tensor '{}' has no file offset",
                      tensors[i].spec.name);
        offsets[i] = static_cast<std::int64_t>(offset);
      }
      hsize_t file_bytes = 0;
      H5_CHECK(H5Fget_filesize(file.get(), &file_bytes));
      failure = close_file(file, datasets, path, "");
      if (!failure.empty()) failure = path + ": " + failure;
      if (failure.empty()) failure = reserve_blocks(path, static_cast<off_t>(file_bytes));
    } catch (const InputError& e) {
      failure = e.what();
      input_error = true;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  std::int64_t kind = input_error ? 1 : 0;
  group.broadcast(kind);
  group.agree(failure, kind != 0);
  std::string packed(reinterpret_cast<const char*>(offsets.data()),
                     offsets.size() * sizeof(std::int64_t));
  group.broadcast(packed);
  std::memcpy(offsets.data(), packed.data(), packed.size());
  std::vector<RawPiece> pieces;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].data.empty())
      pieces.push_back({offsets[i] + tensors[i].first * 4, tensors[i].data});
  }
  return pieces;
}

// The collective part of writing a checkpoint file: the ranks' tensor lists checked, then
// (`values`) every dataset created through parallel HDF5 and each owner's tensors written, or
// (not `values`) the file created by rank 0 with its values unwritten and this rank's pieces
// returned, for write_raw_pieces (create_on_rank_0).
std::vector<RawPiece> write_file(MPI_Comm comm, const std::string& path,
                                 std::span<const TensorData> tensors, const CheckpointMeta& meta,
                                 bool values) {
  const detail::Collective group(comm);
  h5::silence_library_errors();

  // Every rank must describe the same tensors and their values must be given once (one owner,
  // or parts that cover the tensor): HDF5's collective metadata operations hang or corrupt the
  // file otherwise.
  const std::uint64_t fingerprint = tensor_list_fingerprint(tensors);
  group.agree(group.max(fingerprint) == fingerprint && group.max(~fingerprint) == ~fingerprint
                  ? ""
                  : fmt::format("{}ranks pass different tensor lists to the checkpoint writer",
                                rank_prefix()),
              false);
  std::vector<int> given(tensors.size());  // values given, summed over the ranks
  std::string local_problem;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    given[i] = static_cast<int>(t.data.size());
    if (t.spec.numel() > INT_MAX || t.first < 0 ||
        t.first + static_cast<std::int64_t>(t.data.size()) > t.spec.numel())
      local_problem =
          fmt::format("{}tensor '{}' has values [{}, {}) for shape {}", rank_prefix(), t.spec.name,
                      t.first, t.first + t.data.size(), h5::format_shape(t.spec.shape));
  }
  group.agree(local_problem, false);
  group.sum(given);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    CHIMERA_CHECK(given[i] == tensors[i].spec.numel(),
                  "tensor '{}' is given {} values in the checkpoint writer, expected {}",
                  tensors[i].spec.name, given[i], tensors[i].spec.numel());

  CheckpointMeta shared = meta;  // rank 0's, so that the attributes are identical everywhere
  group.broadcast(shared.step);
  group.broadcast(shared.seed);
  group.broadcast(shared.data_cursor);
  group.broadcast(shared.skipped_steps);
  group.broadcast(shared.config);

  if (!values) return create_on_rank_0(group, path, tensors, shared);

  h5::Handle access = h5::plist_handle(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  if (group.parallel()) {
    H5_CHECK(H5Pset_fapl_mpio(access.get(), group.comm(), MPI_INFO_NULL));
    // Rank 0 writes metadata and broadcasts metadata reads: O(1) file-system metadata traffic
    // instead of O(ranks).
    H5_CHECK(H5Pset_all_coll_metadata_ops(access.get(), true));
    H5_CHECK(H5Pset_coll_metadata_write(access.get(), true));
  }
  std::string open_failure;
  h5::Handle file;
  try {
    file = h5::create_file(path, access.get());
  } catch (const InputError& e) {
    open_failure = e.what();
  }
  group.agree(open_failure, true);

  const hid_t root = file.get();
  std::vector<h5::Handle> datasets = create_datasets(root, path, tensors, shared);

  // Reserve the file's blocks before any data is written: a write that fails on some ranks
  // only (another job filled the disk since the free-space check) can leave parallel HDF5's
  // collective flush and close waiting forever, while a failed reservation is agreed on first.
  hsize_t file_bytes = 0;
  H5_CHECK(H5Fget_filesize(root, &file_bytes));
  group.agree(group.rank() == 0 ? reserve_blocks(path, static_cast<off_t>(file_bytes)) : "", false);

  // Owners write independently: no rank waits for tensors it does not hold.
  h5::Handle transfer = h5::plist_handle(H5_CHECK(H5Pcreate(H5P_DATASET_XFER)));
  if (group.parallel()) H5_CHECK(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT));
  std::string write_failure;
  for (std::size_t i = 0; i < tensors.size() && write_failure.empty(); ++i) {
    if (!tensors[i].data.empty())
      write_failure = write_tensor(datasets[i].get(), tensors[i], transfer.get(), path);
  }
  write_failure = close_file(file, datasets, path, write_failure);
  group.agree(write_failure.empty() ? "" : rank_prefix() + path + ": " + write_failure, false);
  return {};
}

}  // namespace

void write_checkpoint_file(MPI_Comm comm, const std::string& path,
                           std::span<const TensorData> tensors, const CheckpointMeta& meta) {
  write_file(comm, path, tensors, meta, true);
}

std::vector<RawPiece> create_checkpoint_file(MPI_Comm comm, const std::string& path,
                                             std::span<const TensorData> tensors,
                                             const CheckpointMeta& meta) {
  return write_file(comm, path, tensors, meta, false);
}

CheckpointDirectory::CheckpointDirectory(std::string dir, int keep)
    : dir_(std::move(dir)), keep_(keep) {
  CHIMERA_REQUIRE(!dir_.empty(), "checkpoint.dir is empty: name a directory for checkpoints");
  CHIMERA_CHECK(keep_ >= 1, "keep {} checkpoints: must be at least 1 (config_checks)", keep_);
  std::error_code ec;
  existed_ = fs::is_directory(dir_, ec);
}

std::string CheckpointDirectory::path_for_step(std::int64_t step) const {
  return (fs::path(dir_) / fmt::format("ckpt-{:08d}.h5", step)).string();
}

std::string CheckpointDirectory::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return fmt::format("{}: cannot create the checkpoint directory: {}", dir_, ec.message());
  const std::string probe = (fs::path(dir_) / fmt::format(".write-test-{}", ::getpid())).string();
  const bool writable = std::ofstream(probe).good();
  fs::remove(probe, ec);
  if (!writable) return fmt::format("{}: the checkpoint directory is not writable", dir_);
  existed_ = true;
  return "";
}

std::string CheckpointDirectory::save(MPI_Comm comm, std::span<const TensorData> tensors,
                                      const CheckpointMeta& meta) const {
  return finish_save(comm, start(comm, tensors, meta, true), "");
}

CheckpointDirectory::StartedSave CheckpointDirectory::begin_save(
    MPI_Comm comm, std::span<const TensorData> tensors, const CheckpointMeta& meta) const {
  return start(comm, tensors, meta, false);
}

std::string CheckpointDirectory::pointer_path() const {
  return (fs::path(dir_) / kLatestPointer).string();
}

void CheckpointDirectory::remove_temporaries(const std::string& temp_path) const {
  std::error_code ignored;
  fs::remove(temp_path, ignored);
  fs::remove(pointer_path() + kTempSuffix, ignored);
}

CheckpointDirectory::StartedSave CheckpointDirectory::start(MPI_Comm comm,
                                                            std::span<const TensorData> tensors,
                                                            const CheckpointMeta& meta,
                                                            bool values) const {
  const detail::Collective group(comm);
  std::string failure, gone;
  if (group.rank() == 0) {
    // A directory that held checkpoints and is gone may be a file system that is no longer
    // mounted: recreating it would write into the mount point, on another disk.
    if (existed_) gone = vanished();
    if (gone.empty()) failure = prepare();
  }
  group.agree(gone, false);
  group.agree(failure, true);

  std::int64_t step = meta.step;
  group.broadcast(step);
  const std::string final_path = path_for_step(step);
  const std::string temp_path = final_path + kTempSuffix;
  // A write that fails on some ranks only can leave parallel HDF5's collective flush waiting
  // forever, so a disk too full for the file is found before HDF5 touches it.
  std::string no_space;
  if (group.rank() == 0) {
    const std::int64_t needed = checkpoint_bytes(tensors, meta);
    const std::int64_t free_bytes = free_space(dir_);
    if (free_bytes < needed)
      no_space = fmt::format(
          "cannot save {}: {} (it needs about {:.1f} MB, {:.1f} MB are free on that file "
          "system)",
          final_path, std::strerror(ENOSPC), static_cast<double>(needed) / 1e6,
          static_cast<double>(free_bytes) / 1e6);
  }
  group.agree(no_space, false);
  // A failed save leaves what was there: the previous checkpoints, `latest`, and no temporary
  // file taking the space a later save needs.
  StartedSave started{temp_path, final_path, {}};
  try {
    started.pieces = write_file(comm, temp_path, tensors, meta, values);
  } catch (const InputError& e) {
    // The directory passed the write probe a moment ago, so a file that cannot be created now is
    // the system failing mid-run (most often the directory removed or unmounted), not bad input.
    std::string failure_now;
    if (group.rank() == 0) {
      remove_temporaries(temp_path);
      failure_now = vanished();
      if (failure_now.empty()) failure_now = e.what();
    }
    group.agree(failure_now, false);
    throw Error(e.what());  // not reached: rank 0's failure is agreed above
  } catch (const Error&) {
    if (group.rank() == 0) remove_temporaries(temp_path);
    throw;
  }
  return started;
}

std::string CheckpointDirectory::finish_save(MPI_Comm comm, const StartedSave& started,
                                             const std::string& local_failure) const {
  const detail::Collective group(comm);
  const std::string& temp_path = started.temp_path;
  const std::string& final_path = started.final_path;
  const std::string pointer = pointer_path();
  std::string failure;
  try {
    group.agree(local_failure.empty() ? "" : rank_prefix() + local_failure, false);
  } catch (const Error&) {
    if (group.rank() == 0) remove_temporaries(temp_path);
    throw;
  }
  if (group.rank() == 0) {
    try {
      rename_durably(temp_path, final_path, dir_);
      {
        std::ofstream out(pointer + kTempSuffix, std::ios::trunc);
        out << fs::path(final_path).filename().string() << "\n";
        out.flush();
        CHIMERA_CHECK(out.good(), "cannot write {}{}: {}", pointer, kTempSuffix,
                      std::strerror(errno));
      }
      rename_durably(pointer + kTempSuffix, pointer, dir_);
      // Pruning comes last: until `latest` names the new file, the old ones are the fallback.
      const std::vector<std::string> present = list();
      for (std::size_t i = 0; i + static_cast<std::size_t>(keep_) < present.size(); ++i)
        fs::remove(present[i]);
      std::error_code ec;
      for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with("ckpt-") && name.ends_with(kTempSuffix)) fs::remove(it->path(), ec);
      }
      if (ec)
        throw Error(fmt::format("{}: saved {}, then could not remove older temporary files: {}",
                                dir_, fs::path(final_path).filename().string(), ec.message()));
    } catch (const std::exception& e) {
      failure = e.what();
      remove_temporaries(temp_path);
    }
  }
  group.agree(failure, false);
  return final_path;
}

std::string CheckpointDirectory::vanished() const {
  std::error_code ec;
  if (fs::is_directory(dir_, ec)) return {};
  return fmt::format("{}: the checkpoint directory has vanished ({}); not recreating it", dir_,
                     std::strerror(ENOENT));
}

std::vector<std::string> CheckpointDirectory::list() const {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const auto step = step_of_checkpoint_name(entry.path().filename().string());
    if (step && entry.is_regular_file()) found.emplace_back(*step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::optional<std::string> CheckpointDirectory::latest() const {
  const fs::path pointer = fs::path(dir_) / kLatestPointer;
  std::ifstream in(pointer);
  std::string name;
  if (in && std::getline(in, name) && step_of_checkpoint_name(name)) {
    const fs::path target = fs::path(dir_) / name;
    std::error_code ec;
    if (fs::is_regular_file(target, ec)) return target.string();
    log::warn("{} names {}, which does not exist; using the newest checkpoint present",
              pointer.string(), name);
  }
  const std::vector<std::string> present = list();
  if (present.empty()) return std::nullopt;
  return present.back();
}

std::vector<std::string> CheckpointDirectory::resume_candidates() const {
  std::vector<std::string> out;
  const auto first = latest();
  if (!first) return out;
  out.push_back(*first);
  const std::vector<std::string> present = list();
  for (auto it = present.rbegin(); it != present.rend(); ++it)
    if (fs::path(*it) != fs::path(*first)) out.push_back(*it);
  return out;
}

}  // namespace chimera::io
