#pragma once
// Checkpoints (docs/DESIGN.md §5): one HDF5 file per checkpoint, independent of D and W.
// Tensors are float32 datasets named like Hugging Face GPT-2 (`wte.weight`, `h.0.attn.c_attn.
// weight`, ...; the model module provides names and HF shapes), AdamW moments under
// `optim/exp_avg/<name>` and `optim/exp_avg_sq/<name>`, and root attributes `step`, `seed`,
// `data_cursor`, `skipped_steps`, `config` (TOML text), `format` and `format_version`.
//
// Writing is collective over an MPI communicator through parallel HDF5 (MPI-IO): every rank
// creates every dataset (HDF5 metadata is collective) and the one rank that owns a tensor writes
// its data, independently of the others. With one rank (or before MPI_Init) the serial driver is
// used. Reading needs no MPI: any rank opens the file read-only and reads what it needs.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::io {

inline constexpr const char* kCheckpointFormat = "chimera-checkpoint";
inline constexpr std::int64_t kCheckpointFormatVersion = 1;

struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

// A tensor as one rank passes it to the writer: every rank lists every tensor (same names,
// shapes and order); `data` is non-empty on exactly one rank, the tensor's owner, or holds a part
// of it: elements [first, first + data.size()) of the flattened tensor (a sharded optimizer's
// moments, each part written by its holder), the parts covering the tensor once over the ranks.
// A part of a tensor of more than two dimensions must be whole rows of its last dimension.
struct TensorData {
  TensorSpec spec;
  std::span<const float> data;
  std::int64_t first = 0;
};

struct CheckpointMeta {
  std::int64_t step = 0;
  std::int64_t seed = 0;
  std::int64_t data_cursor = 0;  // stream position of the next training sample (data/sampler.hpp)
  std::string config;            // the full run configuration, chimera::Config::to_toml()
  // Steps whose update train.on_nonfinite = skip left out: AdamW's step count is step minus
  // these. Absent in older files (read as 0).
  std::int64_t skipped_steps = 0;
};

std::string exp_avg_name(std::string_view tensor);     // "optim/exp_avg/<tensor>"
std::string exp_avg_sq_name(std::string_view tensor);  // "optim/exp_avg_sq/<tensor>"
bool is_optimizer_state(std::string_view name);        // under "optim/"

// Writes one checkpoint file at `path` (no temporary name, no pointer: see CheckpointDirectory).
// Collective over `comm`; the metadata of rank 0 is used. Any rank's failure (an unwritable
// file, a failed write) is reported on every rank, without a hang.
void write_checkpoint_file(MPI_Comm comm, const std::string& path,
                           std::span<const TensorData> tensors, const CheckpointMeta& meta);

// How the checkpoint code's own small collectives (its agreements on a save's outcome, its
// broadcasts) wait: started non-blocking, then MPI_Wait, unless a runtime that watches its waits
// installs this (it gets the request of a collective over `comm` and returns once it has
// completed). Process-wide; install on the thread that saves, and uninstall ({}) before what it
// refers to goes. The collectives inside parallel HDF5 are not among them.
using CollectiveWait = std::function<void(MPI_Request&, MPI_Comm)>;
void set_collective_wait(CollectiveWait wait);

// Writing a checkpoint's values without HDF5 (an asynchronous save's helper thread): the file
// is created collectively with every dataset contiguous and allocated (create_checkpoint_file),
// then each owner writes its tensors' bytes at their offsets with plain pwrite and fsyncs
// (write_raw_pieces). The result is the same HDF5 file write_checkpoint_file writes.
struct RawPiece {
  std::int64_t offset = 0;  // byte offset of the tensor's values in the file
  std::span<const float> data;
};
// Collective as write_checkpoint_file; the values are not written. Returns this rank's pieces.
std::vector<RawPiece> create_checkpoint_file(MPI_Comm comm, const std::string& path,
                                             std::span<const TensorData> tensors,
                                             const CheckpointMeta& meta);
// Not collective, no MPI, no HDF5: may run on any thread. "" when written and (`sync`) flushed
// to disk, else what failed with the system's reason. Around the page cache (O_DIRECT) where
// the file system allows it (src/io/raw_pieces.cpp); `direct_bytes`, where given, receives how
// many bytes went that way.
std::string write_raw_pieces(const std::string& path, std::span<const RawPiece> pieces,
                             bool sync = true, std::size_t* direct_bytes = nullptr);

// A directory of checkpoints `ckpt-<step>.h5` with a `latest` pointer file naming the newest.
class CheckpointDirectory {
 public:
  CheckpointDirectory(std::string dir, int keep);

  const std::string& dir() const { return dir_; }
  std::string path_for_step(std::int64_t step) const;

  // Collective over `comm`. Writes `<final>.tmp`, flushes it to disk, renames it to the final
  // name, then points `latest` at it (written the same way) and removes all but the newest
  // `keep` checkpoints and any stale temporary files. A crash at any moment leaves `latest`
  // naming a complete checkpoint and no partial file under a final name. InputError on every
  // rank when the directory cannot be created or written; an Error when it existed (at
  // construction or an earlier save) and has vanished, or when a write fails (the message names
  // the file and the system's reason, e.g. "No space left on device"): the temporary file is
  // removed and the previous checkpoints and `latest` stay as they were. Returns the final path.
  std::string save(MPI_Comm comm, std::span<const TensorData> tensors,
                   const CheckpointMeta& meta) const;

  // save() in two collective halves around the values' write, for asynchronous saves:
  // begin_save does the checks and creates `<final>.tmp` with its values unwritten (this rank's
  // pieces returned); after each rank has run write_raw_pieces, finish_save agrees on every
  // rank's outcome (`local_failure`, "" or why not) and only then renames the file and moves
  // `latest` (failures: as save()). The arguments and errors are those of save().
  struct StartedSave {
    std::string temp_path;
    std::string final_path;
    std::vector<RawPiece> pieces;
  };
  StartedSave begin_save(MPI_Comm comm, std::span<const TensorData> tensors,
                         const CheckpointMeta& meta) const;
  std::string finish_save(MPI_Comm comm, const StartedSave& started,
                          const std::string& local_failure) const;

  // Creates the directory and writes a probe file in it: "" when checkpoints can be written
  // there, else the line that says why not. Not collective; one rank runs it at setup (and
  // save() before each checkpoint), so that a run learns before its first step, not at its
  // first save, that its checkpoints would be lost.
  std::string prepare() const;

  // The checkpoint `latest` names; without a usable pointer, the highest-step ckpt-*.h5 file;
  // nullopt when the directory holds none (for `--resume`).
  std::optional<std::string> latest() const;
  // What `--resume` tries, in order, until one loads: latest(), then every other checkpoint
  // present, newest first (a damaged newest file falls back to the one before).
  std::vector<std::string> resume_candidates() const;
  // The final checkpoint files present, oldest first.
  std::vector<std::string> list() const;
  // "" while the directory is there; otherwise the line that says it has vanished. Reads only
  // the file system, so it may run on any thread (a save's deadline describes a stuck save).
  std::string vanished() const;

 private:
  StartedSave start(MPI_Comm comm, std::span<const TensorData> tensors, const CheckpointMeta& meta,
                    bool values) const;
  std::string pointer_path() const;
  void remove_temporaries(const std::string& temp_path) const;

  std::string dir_;
  int keep_;
  mutable bool existed_ = false;  // the directory existed once: do not recreate it if it vanishes
};

class CheckpointReader {
 public:
  // Opens `path` read-only. InputError when it is missing, not HDF5 or damaged.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const std::string& path() const;
  // The root attributes; InputError when the file is not a Chimera checkpoint.
  CheckpointMeta meta() const;
  bool is_chimera_checkpoint() const;

  // Every dataset in the file with its shape and type ("float32", ...), sorted by name, and why
  // its values cannot be read (a filter this HDF5 cannot decode, values never written), as a
  // whole message naming the file and tensor; expect() and match_init_weights refuse such a
  // tensor, read() too.
  struct Entry {
    TensorSpec spec;
    std::string dtype;
    std::optional<std::string> problem;
  };
  std::vector<Entry> entries() const;
  std::optional<std::vector<std::int64_t>> shape(const std::string& name) const;

  // Validates the file against what the caller's model holds (for --resume; --init uses
  // match_init_weights): every expected tensor present, of a float type, with the same shape, and
  // no weight in the file the model lacks (nor optimizer state, when `expected` lists some).
  // InputError naming the tensor and both shapes, e.g. "tensor 'wte.weight' has shape [50257, 768]
  // in ckpt.h5 but the model expects [50257, 512]".
  void expect(std::span<const TensorSpec> expected) const;

  // Reads a whole tensor (out.size() must equal its element count) or rows [row_begin,
  // row_begin + rows) of its first dimension, converted to float32 (is_readable_float in
  // init_weights.hpp). InputError naming the file and tensor when it is missing, not of a float
  // type, or the read fails (a damaged file).
  void read(const std::string& name, std::span<float> out) const;
  void read_rows(const std::string& name, std::int64_t row_begin, std::int64_t rows,
                 std::span<float> out) const;
  // The stored bytes of the tensor values read so far (metadata not counted).
  std::int64_t tensor_bytes_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chimera::io
