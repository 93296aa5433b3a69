// `chimera inspect`'s descriptions: file kinds by content, checkpoints, schedules, traces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.hpp"
#include "chimera/core/error.hpp"
#include "chimera/io/describe.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_describe_test";
  fs::create_directories(dir);
  return dir;
}

TEST(Describe, RecognisesFilesByContent) {
  const fs::path dir = temp_dir();
  std::ofstream(dir / "schedule.json")
      << R"({"scheme": "chimera", "variant": "direct", "stages": 2, "micro_batches": 2,
             "pipes": 2, "placement": [[0,1],[1,0]], "pipe_of": [0,1],
             "workers": [[{"op": "F", "pipe": 0, "stage": 0, "mbs": [0]}], []]})";
  std::ofstream(dir / "trace.json")
      << R"({"traceEvents": [{"ph": "X", "pid": 1, "tid": 2, "ts": 10, "dur": 5}]})";
  std::ofstream(dir / "other.json") << R"({"hello": 1})";
  std::ofstream(dir / "text.txt") << "plain text";
  EXPECT_EQ(detect_file_kind((dir / "schedule.json").string()), FileKind::ScheduleJson);
  EXPECT_EQ(detect_file_kind((dir / "trace.json").string()), FileKind::TraceJson);
  EXPECT_THROW(detect_file_kind((dir / "other.json").string()), InputError);
  EXPECT_THROW(detect_file_kind((dir / "text.txt").string()), InputError);
  EXPECT_THROW(detect_file_kind((dir / "missing").string()), InputError);

  const std::string schedule = describe_schedule_json((dir / "schedule.json").string());
  EXPECT_NE(schedule.find("scheme chimera (direct), D=2"), std::string::npos) << schedule;
  EXPECT_NE(schedule.find("worker 0: 1 ops: F=1"), std::string::npos) << schedule;
  const std::string trace = describe_trace_json((dir / "trace.json").string());
  EXPECT_NE(trace.find("allreduce 0.005 (100%)"), std::string::npos) << trace;
}

TEST(Describe, CheckpointTableHasStepShapesAndNorms) {
  const fs::path dir = temp_dir() / "ckpt";
  auto model = testing::gpt2_like(1, 4, 10);
  std::fill(model.values[0].begin(), model.values[0].end(), 0.5f);  // wte: norm sqrt(40)/2
  const std::string path =
      CheckpointDirectory(dir.string(), 1)
          .save(MPI_COMM_SELF, model.all(), {9, 5, 90, "[model]\nn_layer = 1\n"});
  EXPECT_EQ(detect_file_kind(path), FileKind::Checkpoint);
  const std::string text =
      describe_checkpoint(path, {.show_config = true, .norms = true, .guess_model = {}});
  EXPECT_NE(text.find("step 9, seed 5, data cursor 90"), std::string::npos) << text;
  EXPECT_NE(text.find("n_layer=1"), std::string::npos) << text;
  EXPECT_NE(text.find("wte.weight"), std::string::npos) << text;
  EXPECT_NE(text.find("[10, 4]"), std::string::npos) << text;
  EXPECT_NE(text.find("3.16228"), std::string::npos) << text;  // sqrt(40) * 0.5
}

}  // namespace
}  // namespace chimera::io
