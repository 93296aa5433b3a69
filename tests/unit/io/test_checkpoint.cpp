// Checkpoints in one process: round trip, the directory protocol (latest, keep), validation
// against the model's tensors, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.hpp"
#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"
#include "input_error.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;
using testing::gpt2_like;

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_checkpoint_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

CheckpointMeta meta_for(std::int64_t step) {
  return {step, 1337, step * 64, "[model]\nn_layer = 2\n"};
}

using chimera::testing::input_error;

TEST(Checkpoint, RoundTripsTensorsAndAttributes) {
  const fs::path dir = temp_dir("roundtrip");
  const auto model = gpt2_like(2, 8, 50);
  const CheckpointDirectory checkpoints(dir.string(), 3);
  const std::string path = checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(7));
  EXPECT_EQ(path, (dir / "ckpt-00000007.h5").string());

  const CheckpointReader reader(path);
  const CheckpointMeta meta = reader.meta();
  EXPECT_EQ(meta.step, 7);
  EXPECT_EQ(meta.seed, 1337);
  EXPECT_EQ(meta.data_cursor, 7 * 64);
  EXPECT_EQ(meta.config, "[model]\nn_layer = 2\n");
  reader.expect(model.specs);
  for (std::size_t i = 0; i < model.specs.size(); ++i) {
    std::vector<float> got(model.values[i].size());
    reader.read(model.specs[i].name, got);
    ASSERT_EQ(got, model.values[i]) << model.specs[i].name;
  }
  // Rows of the embedding, as a runtime with a padded vocabulary reads it.
  std::vector<float> rows(3 * 8);
  reader.read_rows("wte.weight", 10, 3, rows);
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), model.values[0].begin() + 80));
  EXPECT_EQ(reader.shape("h.1.attn.c_attn.weight"), (std::vector<std::int64_t>{8, 24}));
  EXPECT_FALSE(reader.shape("h.2.attn.c_attn.weight").has_value());
}

TEST(Checkpoint, LatestPointsToTheNewestAndOnlyKeepAreKept) {
  const fs::path dir = temp_dir("keep");
  const auto model = gpt2_like(1, 4, 10);
  const CheckpointDirectory checkpoints(dir.string(), 2);
  EXPECT_FALSE(checkpoints.latest().has_value());
  std::ofstream(dir / "ckpt-00000001.h5.tmp") << "a stale partial file from a crash";
  for (int step = 1; step <= 4; ++step)
    checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(step));
  EXPECT_EQ(checkpoints.list(), (std::vector<std::string>{(dir / "ckpt-00000003.h5").string(),
                                                          (dir / "ckpt-00000004.h5").string()}));
  EXPECT_EQ(checkpoints.latest(), (dir / "ckpt-00000004.h5").string());
  EXPECT_FALSE(fs::exists(dir / "ckpt-00000001.h5.tmp"));
  std::ifstream pointer(dir / "latest");
  std::string name;
  std::getline(pointer, name);
  EXPECT_EQ(name, "ckpt-00000004.h5");
  // Without a pointer, the newest file present is the latest.
  fs::remove(dir / "latest");
  EXPECT_EQ(checkpoints.latest(), (dir / "ckpt-00000004.h5").string());
}

TEST(Checkpoint, SkippedStepsRoundTripAndDefaultToZero) {
  const fs::path dir = temp_dir("skipped");
  const auto model = gpt2_like(1, 4, 10);
  const CheckpointDirectory checkpoints(dir.string(), 3);
  CheckpointMeta meta = meta_for(5);
  meta.skipped_steps = 2;
  EXPECT_EQ(
      CheckpointReader(checkpoints.save(MPI_COMM_SELF, model.all(), meta)).meta().skipped_steps, 2);
}

TEST(Checkpoint, ResumeCandidatesStartAtLatestThenGoNewestFirst) {
  const fs::path dir = temp_dir("candidates");
  const auto model = gpt2_like(1, 4, 10);
  const CheckpointDirectory checkpoints(dir.string(), 3);
  EXPECT_TRUE(checkpoints.resume_candidates().empty());
  for (int step = 1; step <= 3; ++step)
    checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(step));
  auto path = [&](int step) { return checkpoints.path_for_step(step); };
  EXPECT_EQ(checkpoints.resume_candidates(), (std::vector<std::string>{path(3), path(2), path(1)}));
  // `latest` naming an older file (a newer one written but never pointed at): that one first.
  std::ofstream(dir / "latest") << "ckpt-00000002.h5\n";
  EXPECT_EQ(checkpoints.resume_candidates(), (std::vector<std::string>{path(2), path(3), path(1)}));
  // `latest` naming a file that is gone: the newest present.
  fs::remove(path(2));
  EXPECT_EQ(checkpoints.resume_candidates(), (std::vector<std::string>{path(3), path(1)}));
}

TEST(Checkpoint, VanishedDirectoryIsNotRecreated) {
  const fs::path dir = temp_dir("vanished");
  const auto model = gpt2_like(1, 4, 10);
  const CheckpointDirectory checkpoints(dir.string(), 3);
  checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(1));
  fs::remove_all(dir);
  try {
    checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(2));
    FAIL() << "a save into a vanished directory succeeded";
  } catch (const InputError& e) {
    FAIL() << "a vanished directory is not bad input: " << e.what();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("vanished (No such file or directory)"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(dir));
}

TEST(Checkpoint, DifferentModelShapeNamesTheTensorAndBothShapes) {
  const fs::path dir = temp_dir("shape");
  const auto model = gpt2_like(2, 8, 50);
  const std::string path =
      CheckpointDirectory(dir.string(), 1).save(MPI_COMM_SELF, model.all(), meta_for(1));
  const CheckpointReader reader(path);

  const auto wider = gpt2_like(2, 12, 50);
  const std::string shape = input_error([&] { reader.expect(wider.specs); });
  EXPECT_NE(shape.find("'wte.weight' has shape [50, 8] but the model expects [50, 12]"),
            std::string::npos)
      << shape;
  const auto deeper = gpt2_like(3, 8, 50);
  const std::string missing = input_error([&] { reader.expect(deeper.specs); });
  EXPECT_NE(missing.find("has no tensor 'h.2.ln_1.weight'"), std::string::npos) << missing;
  const auto shallower = gpt2_like(1, 8, 50);
  const std::string extra = input_error([&] { reader.expect(shallower.specs); });
  EXPECT_NE(extra.find("'h.1."), std::string::npos) << extra;

  // --init: weights only, optimizer state in the file is ignored.
  std::vector<TensorSpec> weights;
  for (const auto& s : model.specs)
    if (!is_optimizer_state(s.name)) weights.push_back(s);
  reader.expect(weights);
}

TEST(Checkpoint, BadFilesAreInputErrors) {
  const fs::path dir = temp_dir("bad");
  EXPECT_NE(input_error([&] { CheckpointReader((dir / "missing.h5").string()); }).find("no such"),
            std::string::npos);
  std::ofstream(dir / "text.h5") << "not hdf5";
  EXPECT_NE(input_error([&] { CheckpointReader((dir / "text.h5").string()); }).find("not an HDF5"),
            std::string::npos);

  const auto model = gpt2_like(2, 32, 200);
  const std::string path =
      CheckpointDirectory((dir / "ok").string(), 1).save(MPI_COMM_SELF, model.all(), meta_for(1));
  const std::string cut = (dir / "cut.h5").string();
  fs::copy_file(path, cut);
  fs::resize_file(cut, fs::file_size(path) / 2);
  const std::string truncated = input_error([&] {
    const CheckpointReader reader(cut);
    for (std::size_t i = 0; i < model.specs.size(); ++i) {
      std::vector<float> v(model.values[i].size());
      reader.read(model.specs[i].name, v);
    }
  });
  EXPECT_NE(truncated.find(cut), std::string::npos) << truncated;
}

TEST(Checkpoint, UnwritableDirectoryIsAnInputError) {
  const fs::path dir = temp_dir("unwritable");
  std::ofstream(dir / "a_file") << "x";
  const auto model = gpt2_like(1, 4, 10);
  // Below a regular file: never creatable, even for root.
  const CheckpointDirectory checkpoints((dir / "a_file" / "ckpts").string(), 1);
  const std::string message =
      input_error([&] { checkpoints.save(MPI_COMM_SELF, model.all(), meta_for(1)); });
  EXPECT_NE(message.find("a_file/ckpts"), std::string::npos) << message;
  EXPECT_THROW(CheckpointDirectory(dir.string(), 0), Error);  // checkpoint.keep: config_checks
}

TEST(Checkpoint, WriterRejectsInconsistentTensors) {
  const fs::path dir = temp_dir("inconsistent");
  auto model = gpt2_like(1, 4, 10);
  auto tensors = model.all();
  tensors[0].data = tensors[0].data.first(3);  // wrong size for its shape
  EXPECT_THROW(write_checkpoint_file(MPI_COMM_SELF, (dir / "x.h5").string(), tensors, meta_for(1)),
               Error);
  tensors = model.all();
  tensors[1].data = {};  // nobody owns it
  EXPECT_THROW(write_checkpoint_file(MPI_COMM_SELF, (dir / "y.h5").string(), tensors, meta_for(1)),
               Error);
}

}  // namespace
}  // namespace chimera::io
