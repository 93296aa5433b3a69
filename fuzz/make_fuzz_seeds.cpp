// Writes small valid inputs for the fuzz targets: datasets (uint16 and int32, and one as h5py
// writes it: int64 tokens, variable-length string attributes), checkpoints (Chimera's, and
// Hugging Face named tensors with a tied lm_head and a variable-length string attribute) and
// safetensors files.
// usage: make_fuzz_seeds CORPUS_DIR  (creates
// CORPUS_DIR/{dataset,checkpoint,safetensors,tokenizer}/)
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "chimera/data/dataset_writer.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/safetensors.hpp"

namespace {

using chimera::h5::Handle;

// What h5py writes for a Python str: a variable-length UTF-8 string.
void write_vlen_string(hid_t object, const char* name, const char* text) {
  Handle type = chimera::h5::datatype_handle(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space = chimera::h5::dataspace_handle(H5Screate(H5S_SCALAR));
  Handle attribute = chimera::h5::attribute_handle(
      H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(attribute.get(), type.get(), &text);
}

template <typename T>
void write_array(hid_t file, const char* name, hid_t stored, hid_t memory,
                 const std::vector<hsize_t>& dims, const std::vector<T>& values) {
  Handle space = chimera::h5::dataspace_handle(
      H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dataset = chimera::h5::dataset_handle(
      H5Dcreate2(file, name, stored, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Dwrite(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

}  // namespace

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

  {
    Handle file = chimera::h5::create_file((root / "dataset" / "h5py.h5").string());
    write_array(file.get(), "tokens", H5T_STD_I64LE, H5T_NATIVE_INT32, {tokens.size()}, tokens);
    write_vlen_string(file.get(), "tokenizer", "gpt2");
    write_vlen_string(file.get(), "vocab_size", "50257");
    chimera::h5::write_int_attribute(file.get(), "eos_token", 50256);
  }

  std::vector<float> wte(16 * 8, 0.5f), bias(8, -1.0f);
  {
    Handle file = chimera::h5::create_file((root / "checkpoint" / "hf.h5").string());
    write_array(file.get(), "transformer.wte.weight", H5T_IEEE_F64LE, H5T_NATIVE_FLOAT, {16, 8},
                wte);
    write_array(file.get(), "lm_head.weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {16, 8}, wte);
    write_array(file.get(), "transformer.ln_f.bias", H5T_IEEE_F64LE, H5T_NATIVE_FLOAT, {8}, bias);
    write_array(file.get(), "transformer.h.0.attn.bias", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {8},
                bias);
    write_vlen_string(file.get(), "config", "{\"model_type\": \"gpt2\"}");
  }
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
