// Killing the process while it writes a checkpoint: the previous checkpoint stays loadable,
// `latest` names a complete checkpoint, and no partial file carries a final name.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "checkpoint_fixture.hpp"
#include "chimera/io/checkpoint.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;
using testing::gpt2_like;

using testing::file_holds;

TEST(CheckpointCrash, KillDuringWriteLeavesThePreviousCheckpointLoadable) {
  const auto old_model = gpt2_like(1, 8, 16, 0.0f);
  const auto new_model = gpt2_like(8, 256, 4096, 1.0f);  // ~60 MB: the write takes a while
  int killed_mid_write = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const fs::path dir =
        fs::path(::testing::TempDir()) / "chimera_crash_test" / std::to_string(trial);
    fs::remove_all(dir);
    const CheckpointDirectory checkpoints(dir.string(), 3);
    const std::string previous = checkpoints.save(MPI_COMM_SELF, old_model.all(), {1, 1, 1, "a"});
    const std::string final_path = checkpoints.path_for_step(2);

    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      checkpoints.save(MPI_COMM_SELF, new_model.all(), {2, 1, 2, "b"});
      _exit(0);
    }
    // Kill once the temporary file exists, a little later in each trial.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(final_path + ".tmp") && !fs::exists(final_path) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::milliseconds(trial * 3));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);

    const bool finished = fs::exists(final_path);
    if (!finished && fs::exists(final_path + ".tmp")) ++killed_mid_write;
    // Whatever the moment: the previous checkpoint loads, `latest` names a complete checkpoint,
    // and a file under the new final name is complete.
    EXPECT_TRUE(file_holds(previous, old_model)) << "trial " << trial;
    const auto latest = checkpoints.latest();
    ASSERT_TRUE(latest.has_value());
    if (*latest == previous) {
      EXPECT_EQ(CheckpointReader(*latest).meta().step, 1);
    } else {
      EXPECT_EQ(*latest, final_path);
      EXPECT_TRUE(file_holds(*latest, new_model));
    }
    if (finished) {
      EXPECT_TRUE(file_holds(final_path, new_model)) << "trial " << trial;
    }
  }
  EXPECT_GT(killed_mid_write, 0) << "no trial killed the writer mid-write; the test is moot";
}

}  // namespace
}  // namespace chimera::io
