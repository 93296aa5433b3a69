// Writes the checkpoint that tests/unit/io/test_load_checkpoint.py reads with h5py (only when
// CTest's fixture sets CHIMERA_INTEROP_DIR; skipped otherwise).
#include <gtest/gtest.h>

#include <cstdlib>

#include "checkpoint_fixture.hpp"
#include "chimera/io/checkpoint.hpp"

namespace chimera::io {
namespace {

TEST(PythonInterop, WriteCheckpointForH5py) {
  const char* dir = std::getenv("CHIMERA_INTEROP_DIR");
  if (dir == nullptr) GTEST_SKIP() << "run by the python interop fixture only";
  const auto model = testing::gpt2_like(2, 8, 50);
  const std::string path = CheckpointDirectory(dir, 1).save(
      MPI_COMM_SELF, model.all(), {5, 1337, 320, "[model]\nn_layer = 2\nn_embd = 8\n"});
  EXPECT_EQ(path, std::string(dir) + "/ckpt-00000005.h5");
}

}  // namespace
}  // namespace chimera::io
