// Checkpoint files the fuzzer once crashed the reader with (fuzz/regressions/checkpoint): each
// must give an InputError or entries whose problems say what is damaged, never another error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;

TEST(DamagedCheckpoints, FuzzerFindsAreRefusedAsDamagedInput) {
  const fs::path dir = fs::path(CHIMERA_SOURCE_DIR) / "fuzz" / "regressions" / "checkpoint";
  int files = 0;
  for (const auto& file : fs::directory_iterator(dir)) {
    ++files;
    std::vector<std::string> messages;
    try {
      const CheckpointReader reader(file.path().string());
      for (const auto& entry : reader.entries())
        if (entry.problem) messages.push_back(*entry.problem);
    } catch (const InputError& e) {
      messages.emplace_back(e.what());
    } catch (const std::exception& e) {
      ADD_FAILURE() << file.path() << ": not an input error: " << e.what();
      continue;
    }
    bool damaged = false;
    for (const auto& m : messages) damaged = damaged || m.find("damaged") != std::string::npos;
    EXPECT_TRUE(damaged) << file.path() << ": no message says the file is damaged ("
                         << messages.size() << " messages)";
  }
  ASSERT_GT(files, 0) << "no regression inputs in " << dir;
}

}  // namespace
}  // namespace chimera::io
