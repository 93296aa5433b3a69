// Parallel checkpoint writes at several rank counts: every rank creates every dataset, each
// tensor's owner (a different rank per tensor, as pipeline stages would be) writes its data,
// and every rank reads the whole file back. The values depend only on the tensor, so a file
// written at any rank count is the same checkpoint (what lets a run resume with another D).
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.hpp"
#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"
#include "mpi_world.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;

int rank() {
  return chimera::testing::world_rank();
}
int world() {
  return chimera::testing::world_size();
}

// One directory for the whole job, named by rank 0.
std::string shared_dir(const std::string& name) {
  std::string dir;
  if (rank() == 0) {
    dir = (fs::path(::testing::TempDir()) /
           ("chimera_mpi_checkpoint_" + std::to_string(::getpid())) / name)
              .string();
    fs::remove_all(dir);
  }
  int length = static_cast<int>(dir.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(length));
  MPI_Bcast(dir.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

// Rank r owns tensors r, r + P, ...; the others list them without data.
std::vector<TensorData> owned_by_rank(const testing::NamedTensors& model) {
  auto tensors = model.all();
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(world())) != rank()) tensors[i].data = {};
  return tensors;
}

int all_ranks_agree(bool ok) {
  int local = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

TEST(CheckpointMpi, EachOwnerWritesItsTensorsAndEveryRankReadsAll) {
  const auto model = testing::gpt2_like(4, 16, 300);
  const CheckpointDirectory checkpoints(shared_dir("roundtrip"), 2);
  std::string path;
  for (int step = 1; step <= 3; ++step)
    path = checkpoints.save(MPI_COMM_WORLD, owned_by_rank(model),
                            {step, 1337, step * 10, "[parallel]\nstages = 4\n"});
  MPI_Barrier(MPI_COMM_WORLD);
  bool ok = checkpoints.latest() == path && checkpoints.list().size() == 2;
  const CheckpointReader reader(path);
  const CheckpointMeta meta = reader.meta();
  ok = ok && meta.step == 3 && meta.data_cursor == 30 && meta.config == "[parallel]\nstages = 4\n";
  reader.expect(model.specs);
  for (std::size_t i = 0; i < model.specs.size(); ++i) {
    std::vector<float> v(model.values[i].size());
    reader.read(model.specs[i].name, v);
    ok = ok && v == model.values[i];
  }
  EXPECT_TRUE(all_ranks_agree(ok)) << "rank " << rank();
}

// A sharded optimizer's moments: every tensor cut into one part per rank at boundaries that
// split rows (blocks of ceil(numel / P) + 5 elements, the last parts short or empty), each part
// written by its rank, through HDF5 hyperslabs (save) and raw pieces (begin_save).
std::vector<TensorData> parts_by_rank(const testing::NamedTensors& model) {
  auto tensors = model.all();
  for (auto& t : tensors) {
    const auto n = static_cast<std::size_t>(t.spec.numel());
    const std::size_t block = (n + static_cast<std::size_t>(world()) - 1) / world() + 5;
    const std::size_t lo = std::min(n, block * static_cast<std::size_t>(rank()));
    const std::size_t hi = std::min(n, lo + block);
    t.data = t.data.subspan(lo, hi - lo);
    t.first = static_cast<std::int64_t>(lo);
  }
  return tensors;
}

TEST(CheckpointMpi, PartsOfEveryTensorWrittenByTheirRanksMakeTheWholeFile) {
  const auto model = testing::gpt2_like(2, 16, 301);
  const CheckpointDirectory checkpoints(shared_dir("parts"), 2);
  const std::string synchronous =
      checkpoints.save(MPI_COMM_WORLD, parts_by_rank(model), {1, 1, 1, ""});
  auto started = checkpoints.begin_save(MPI_COMM_WORLD, parts_by_rank(model), {2, 1, 1, ""});
  const std::string raw = checkpoints.finish_save(
      MPI_COMM_WORLD, started, write_raw_pieces(started.temp_path, started.pieces));
  MPI_Barrier(MPI_COMM_WORLD);
  bool ok = true;
  for (const auto& path : {synchronous, raw}) {
    const CheckpointReader reader(path);
    for (std::size_t i = 0; i < model.specs.size(); ++i) {
      std::vector<float> v(model.values[i].size());
      reader.read(model.specs[i].name, v);
      ok = ok && v == model.values[i];
    }
  }
  EXPECT_TRUE(all_ranks_agree(ok)) << "rank " << rank();
}

TEST(CheckpointMpi, UnwritableDirectoryFailsOnEveryRankWithoutAHang) {
  const std::string dir = shared_dir("unwritable");
  if (rank() == 0) {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "file") << "x";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto model = testing::gpt2_like(1, 4, 10);
  const CheckpointDirectory checkpoints((fs::path(dir) / "file" / "sub").string(), 1);
  bool input_error = false;
  try {
    checkpoints.save(MPI_COMM_WORLD, owned_by_rank(model), {1, 1, 1, ""});
  } catch (const InputError&) {
    input_error = true;
  }
  EXPECT_TRUE(all_ranks_agree(input_error));
}

TEST(CheckpointMpi, TwoOwnersOfOneTensorAreABugOnEveryRank) {
  if (world() < 2) GTEST_SKIP() << "needs two ranks";
  const auto model = testing::gpt2_like(1, 4, 10);
  auto tensors = owned_by_rank(model);
  tensors[0].data = model.values[0];  // every rank claims tensor 0
  bool error = false;
  try {
    write_checkpoint_file(MPI_COMM_WORLD, shared_dir("owners") + ".h5", tensors, {1, 1, 1, ""});
  } catch (const Error&) {
    error = true;
  }
  EXPECT_TRUE(all_ranks_agree(error));
}

}  // namespace
}  // namespace chimera::io
