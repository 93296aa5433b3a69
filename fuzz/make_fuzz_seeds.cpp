// Writes small valid inputs for the fuzz targets: datasets (uint16 and int32) and checkpoints.
// usage: make_fuzz_seeds CORPUS_DIR  (creates CORPUS_DIR/{dataset,checkpoint,tokenizer}/)
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "chimera/data/dataset_writer.hpp"
#include "chimera/io/checkpoint.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) return 2;
  const fs::path root = argv[1];
  for (const char* kind : {"dataset", "checkpoint", "tokenizer"})
    fs::create_directories(root / kind);

  std::vector<std::int32_t> tokens(100);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (const int vocab : {50257, 70000}) {
    chimera::data::TokenDatasetWriter writer(
        (root / "dataset" / fmt::format("v{}.h5", vocab)).string(), vocab, vocab - 1, "gpt2", 16);
    writer.append(tokens);
    writer.finish();
  }

  std::vector<float> wte(16 * 8, 0.5f), bias(8, -1.0f);
  const std::vector<chimera::io::TensorData> tensors{
      {{"wte.weight", {16, 8}}, wte},
      {{"ln_f.bias", {8}}, bias},
      {{chimera::io::exp_avg_name("ln_f.bias"), {8}}, bias}};
  chimera::io::write_checkpoint_file(MPI_COMM_SELF, (root / "checkpoint" / "ckpt.h5").string(),
                                     tensors, {3, 1337, 12, "[model]\nn_layer = 1\n"});

  std::ofstream(root / "tokenizer" / "text.txt")
      << "Hello world! It's 2024: caf\xC3\xA9 \xF0\x9F\x98\x80  \n\tx";
  return 0;
}
