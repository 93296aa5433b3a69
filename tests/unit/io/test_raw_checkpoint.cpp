// Asynchronous saves write a checkpoint's values with plain pwrite at each dataset's offset
// (create_checkpoint_file, write_raw_pieces): the file is the one HDF5 writes, and a process
// killed during that write leaves the previous checkpoint and `latest` as they were.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "checkpoint_fixture.hpp"
#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;
using testing::gpt2_like;

using testing::file_holds;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_raw_checkpoint" / name;
  fs::remove_all(dir);
  return dir;
}

TEST(RawCheckpoint, PiecesWrittenByPwriteMakeTheFileHdf5Writes) {
  const auto model = gpt2_like(2, 16, 64, 0.5f);
  const fs::path dir = fresh_dir("same");
  const CheckpointDirectory checkpoints(dir.string(), 3);
  const CheckpointMeta meta{4, 7, 123, "config text", 1};
  const auto started = checkpoints.begin_save(MPI_COMM_SELF, model.all(), meta);
  EXPECT_TRUE(fs::exists(started.temp_path));
  EXPECT_FALSE(fs::exists(started.final_path));  // not named before the values are written
  ASSERT_EQ(started.pieces.size(), model.specs.size());
  EXPECT_EQ(write_raw_pieces(started.temp_path, started.pieces), "");
  const std::string path = checkpoints.finish_save(MPI_COMM_SELF, started, "");
  EXPECT_EQ(path, checkpoints.path_for_step(4));
  EXPECT_EQ(checkpoints.latest(), path);
  EXPECT_TRUE(file_holds(path, model));
  const CheckpointMeta read = CheckpointReader(path).meta();
  EXPECT_EQ(read.step, 4);
  EXPECT_EQ(read.data_cursor, 123);
  EXPECT_EQ(read.skipped_steps, 1);
}

TEST(RawCheckpoint, AFailedWriteLeavesThePreviousCheckpointNamed) {
  const auto old_model = gpt2_like(1, 8, 16, 0.0f);
  const auto new_model = gpt2_like(1, 8, 16, 1.0f);
  const fs::path dir = fresh_dir("failed");
  const CheckpointDirectory checkpoints(dir.string(), 3);
  const std::string previous = checkpoints.save(MPI_COMM_SELF, old_model.all(), {1, 1, 1, "a"});
  const auto started = checkpoints.begin_save(MPI_COMM_SELF, new_model.all(), {2, 1, 2, "b"});
  EXPECT_THROW(checkpoints.finish_save(MPI_COMM_SELF, started, "writing failed: I/O error"),
               chimera::Error);
  EXPECT_FALSE(fs::exists(started.temp_path));
  EXPECT_FALSE(fs::exists(started.final_path));
  EXPECT_EQ(checkpoints.latest(), previous);
  EXPECT_TRUE(file_holds(previous, old_model));
}

TEST(RawCheckpoint, ANamedPathThatCannotBeOpenedIsReportedNotThrown) {
  const auto model = gpt2_like(1, 8, 16, 0.0f);
  const std::string missing = (fresh_dir("missing") / "gone.h5.tmp").string();
  const std::vector<RawPiece> pieces{{0, model.values[0]}};
  EXPECT_NE(write_raw_pieces(missing, pieces).find("cannot open"), std::string::npos);
}

// Pieces at offsets and from memory that are not block-aligned (and one that is): every byte
// lands where it belongs, around the page cache where the file system has O_DIRECT.
void expect_pieces_written(const fs::path& file, bool direct_expected) {
  constexpr std::size_t kBlock = 4096;
  const std::size_t size = 8 * kBlock;
  {
    std::ofstream out(file, std::ios::binary);
    const std::string fill(size, '\xab');
    out.write(fill.data(), static_cast<std::streamsize>(fill.size()));
  }
  std::vector<float> values(4 * kBlock);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.25F;
  std::unique_ptr<float, decltype(&std::free)> aligned(
      static_cast<float*>(std::aligned_alloc(kBlock, 2 * kBlock)), &std::free);
  for (std::size_t i = 0; i < 2 * kBlock / 4; ++i) aligned.get()[i] = -static_cast<float>(i);
  const std::vector<RawPiece> pieces{
      {kBlock + 12, std::span<const float>(values.data() + 3, (3 * kBlock + 100) / 4)},
      {5 * kBlock, std::span<const float>(aligned.get(), 2 * kBlock / 4)},
      {7 * kBlock + 8, std::span<const float>(values.data(), 16)},  // within one block
  };
  std::string expected(size, '\xab');
  for (const RawPiece& p : pieces)
    std::memcpy(expected.data() + p.offset, p.data.data(), p.data.size_bytes());
  std::size_t direct = 0;
  ASSERT_EQ(write_raw_pieces(file.string(), pieces, true, &direct), "");
  std::ifstream in(file, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "a byte went elsewhere";
  if (direct_expected) {
    // The first piece's aligned middle [2, 4) blocks and the second piece's 2 blocks.
    EXPECT_EQ(direct, 4 * kBlock);
  } else {
    EXPECT_EQ(direct, 0U);
  }
}

bool has_direct_io(const fs::path& file) {
  { std::ofstream(file) << "x"; }
  const int fd = ::open(file.c_str(), O_WRONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

TEST(RawCheckpoint, DirectWritesPutEveryByteWhereItBelongs) {
  const fs::path dir = fresh_dir("direct");
  fs::create_directories(dir);
  const fs::path file = dir / "pieces.bin";
  if (!has_direct_io(file)) GTEST_SKIP() << dir << " has no O_DIRECT: only the buffered path";
  expect_pieces_written(file, true);
}

TEST(RawCheckpoint, BufferedWritesWhereTheFileSystemHasNoDirectIo) {
  const fs::path dir = fs::path("/dev/shm") / "chimera_raw_checkpoint_buffered";
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!fs::create_directories(dir, ec) || has_direct_io(dir / "pieces.bin")) {
    fs::remove_all(dir, ec);
    GTEST_SKIP() << "no tmpfs without O_DIRECT at /dev/shm to test the buffered path on";
  }
  expect_pieces_written(dir / "pieces.bin", false);
  fs::remove_all(dir, ec);
}

// SIGKILL while the values are being written (the child writes ~60 MB piece by piece), at a
// later moment in each trial: the previous checkpoint stays named by `latest` and loadable.
TEST(RawCheckpoint, KillDuringBackgroundWriteLeavesThePreviousCheckpoint) {
  const auto old_model = gpt2_like(1, 8, 16, 0.0f);
  const auto new_model = gpt2_like(8, 256, 4096, 1.0f);
  for (int trial = 0; trial < 3; ++trial) {
    const fs::path dir = fresh_dir("kill" + std::to_string(trial));
    const CheckpointDirectory checkpoints(dir.string(), 3);
    const std::string previous = checkpoints.save(MPI_COMM_SELF, old_model.all(), {1, 1, 1, "a"});
    const auto started = checkpoints.begin_save(MPI_COMM_SELF, new_model.all(), {2, 1, 2, "b"});
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int round = 0; round < 100; ++round) write_raw_pieces(started.temp_path, started.pieces);
      _exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + trial * 30));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status)) << "the write ended before the kill";
    EXPECT_EQ(checkpoints.latest(), previous);
    EXPECT_FALSE(fs::exists(started.final_path));
    EXPECT_TRUE(file_holds(previous, old_model));
    // The next save clears the killed one's temporary file.
    checkpoints.save(MPI_COMM_SELF, old_model.all(), {3, 1, 3, "c"});
    EXPECT_FALSE(fs::exists(started.temp_path));
  }
}

}  // namespace
}  // namespace chimera::io
