// Writes small valid inputs for the fuzz targets: datasets (uint16 and int32), checkpoints and
// safetensors files.
// usage: make_fuzz_seeds CORPUS_DIR  (creates
// CORPUS_DIR/{dataset,checkpoint,safetensors,tokenizer}/)
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "chimera/data/dataset_writer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/safetensors.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) return 2;
  const fs::path root = argv[1];
  for (const char* kind : {"dataset", "checkpoint", "safetensors", "tokenizer"})
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

  const std::vector<chimera::io::SafetensorsTensor> weights{
      {"transformer.wte.weight", {16, 8}, wte}, {"transformer.ln_f.bias", {8}, bias}};
  chimera::io::write_safetensors((root / "safetensors" / "model.safetensors").string(), weights,
                                 {{"format", "pt"}});
  // The same layout with F16 and BF16 data (bit patterns of 1.0 and -1.0), and an I64 tensor.
  std::ofstream half(root / "safetensors" / "half.safetensors", std::ios::binary);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]},)"
      R"("c":{"dtype":"I64","shape":[1],"data_offsets":[6,14]}}  )";
  const std::uint64_t length = header.size();
  half.write(reinterpret_cast<const char*>(&length), 8);
  half << header;
  const std::uint16_t halves[3] = {0x3C00, 0xBC00, 0xBF80};
  half.write(reinterpret_cast<const char*>(halves), sizeof(halves));
  half << std::string(8, '\1');

  std::ofstream(root / "tokenizer" / "text.txt")
      << "Hello world! It's 2024: caf\xC3\xA9 \xF0\x9F\x98\x80  \n\tx";
  return 0;
}
