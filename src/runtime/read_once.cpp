#include "read_once.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <vector>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"

namespace chimera::runtime {

namespace {

// Broadcast pieces: MPI counts are 32-bit, and smaller pieces keep transport buffers small.
constexpr std::size_t kPieceFloats = std::size_t{64} << 20;  // 256 MiB

void broadcast(MPI_Comm comm, std::int64_t& value, int root) {
  MPI_CHECK(MPI_Bcast(&value, 1, MPI_INT64_T, root, comm));
}

bool owns_any(const comm::Topology& topo) {
  return std::any_of(topo.held.begin(), topo.held.end(), [&](int s) { return topo.owns(s); });
}

}  // namespace

io::CheckpointMeta read_meta_once(MPI_Comm world, const std::string& path) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  io::CheckpointMeta meta;
  comm::all_or_none(world, [&] {
    if (rank == 0) meta = io::CheckpointReader(path).meta();
  });
  for (std::int64_t* v : {&meta.step, &meta.seed, &meta.data_cursor, &meta.skipped_steps})
    broadcast(world, *v, 0);
  meta.config = comm::broadcast(world, meta.config, 0);
  return meta;
}

std::string describe_load(const std::string& path, std::int64_t bytes_read) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0)
    return fmt::format("; read {:.1f} MB of tensors", static_cast<double>(bytes_read) / 1e6);
  return fmt::format(
      "; read {:.1f} MB of tensors from the {:.1f} MB file ({:.2f}x its size, all "
      "ranks together)",
      static_cast<double>(bytes_read) / 1e6, static_cast<double>(size) / 1e6,
      static_cast<double>(bytes_read) / static_cast<double>(size));
}

ReadOnceLoader::ReadOnceLoader(const comm::Topology& topo, const comm::Communicators& comms)
    : topo_(topo), comms_(comms) {
  if (comms_.tied() == MPI_COMM_NULL) return;
  MPI_Group world_group, tied_group;
  MPI_CHECK(MPI_Comm_group(comms_.world(), &world_group));
  MPI_CHECK(MPI_Comm_group(comms_.tied(), &tied_group));
  const int owner = topo_.owner_rank(0);
  MPI_CHECK(MPI_Group_translate_ranks(world_group, 1, &owner, tied_group, &tied_root_));
  MPI_Group_free(&world_group);
  MPI_Group_free(&tied_group);
  CHIMERA_CHECK(tied_root_ != MPI_UNDEFINED, "the tied embedding's owner does not hold it");
}

void ReadOnceLoader::open(const std::string& path) {
  if (owns_any(topo_)) reader_.emplace(path);
}

MPI_Comm ReadOnceLoader::comm_of(const model::TensorInfo& t) const {
  return t.stage == model::kTiedStage ? comms_.tied() : comms_.stage(t.stage);
}

int ReadOnceLoader::root_of(const model::TensorInfo& t) const {
  // A stage's communicator orders its holders by world rank, and the owner is the lowest.
  return t.stage == model::kTiedStage ? tied_root_ : 0;
}

void ReadOnceLoader::fetch(const model::TensorInfo& t, const std::string& file_name,
                           std::span<float> host) {
  const MPI_Comm comm = comm_of(t);
  const int root = root_of(t);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::int64_t ok = 1;
  if (rank == root) {
    CHIMERA_CHECK(reader_.has_value(), "the owner of '{}' has no open checkpoint", t.name);
    if (failure_.empty()) {
      try {
        reader_->read(file_name, host);
      } catch (const std::exception& e) {
        failure_ = e.what();
      }
    }
    ok = failure_.empty() ? 1 : 0;
  }
  broadcast(comm, ok, root);
  if (ok == 0) {
    if (rank != root && failure_.empty())
      failure_ =
          fmt::format("tensor '{}' could not be read by its owner (world rank {})", file_name,
                      topo_.owner_rank(t.stage == model::kTiedStage ? 0 : t.stage));
    return;
  }
  for (std::size_t begin = 0; begin < host.size(); begin += kPieceFloats) {
    const std::size_t n = std::min(kPieceFloats, host.size() - begin);
    MPI_CHECK(MPI_Bcast(host.data() + begin, static_cast<int>(n), MPI_FLOAT, root, comm));
  }
}

void ReadOnceLoader::finish() const {
  if (!failure_.empty()) throw InputError(failure_);
}

std::int64_t ReadOnceLoader::total_bytes_read() const {
  std::int64_t bytes = reader_ ? reader_->tensor_bytes_read() : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_INT64_T, MPI_SUM, comms_.world()));
  return bytes;
}

}  // namespace chimera::runtime
