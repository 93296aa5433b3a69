// `--init` from files of GPT-2 tensors that other tools write: name forms, buffers, the tied
// head, float dtypes, and every refusal (the h5py end-to-end cases: cli.h5py_inputs).
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint_fixture.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/io/init_weights.hpp"
#include "input_error.hpp"

namespace chimera::io {
namespace {

using chimera::testing::input_error;

// The fixture's weights (no optimizer state) with values exact in float16.
testing::NamedTensors weights() {
  auto all = testing::gpt2_like(2, 4, 10);
  testing::NamedTensors w;
  for (std::size_t i = 0; i < all.specs.size(); ++i) {
    if (is_optimizer_state(all.specs[i].name)) continue;
    w.specs.push_back(all.specs[i]);
    w.values.push_back(all.values[i]);
    for (float& v : w.values.back()) v = std::round(v * 64) / 64;
  }
  return w;
}

// One file of `tensors` under `prefix`, stored as `stored` (a float type), plus `extra` datasets.
std::string write_file(const std::string& name, const testing::NamedTensors& tensors,
                       const std::string& prefix, hid_t stored,
                       const std::vector<std::pair<std::string, TensorSpec>>& extra = {}) {
  const std::string path = ::testing::TempDir() + "/init_weights_" + name;
  h5::Handle file = h5::create_file(path);
  const auto write = [&](const std::string& dataset, const TensorSpec& spec, hid_t type,
                         const float* values) {
    const std::vector<hsize_t> dims(spec.shape.begin(), spec.shape.end());
    h5::Handle space = h5::dataspace_handle(
        H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
    h5::Handle set = h5::dataset_handle(H5_CHECK(H5Dcreate2(
        file.get(), dataset.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    H5_CHECK(H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
  };
  for (std::size_t i = 0; i < tensors.specs.size(); ++i)
    write(prefix + tensors.specs[i].name, tensors.specs[i], stored, tensors.values[i].data());
  for (const auto& [dataset, spec] : extra) {
    const std::vector<float> values(static_cast<std::size_t>(spec.numel()), 1.0f);
    write(dataset, spec, spec.name == "int" ? H5T_STD_I32LE : H5T_IEEE_F32LE, values.data());
  }
  return path;
}

// A 16-bit float with `exponent` and `mantissa` bits: IEEE half (5, 10) as h5py defines it, or
// bfloat16 (8, 7). HDF5 1.10 predefines neither.
h5::Handle float16_type(std::size_t exponent, std::size_t mantissa) {
  h5::Handle type = h5::datatype_handle(H5_CHECK(H5Tcopy(H5T_IEEE_F32LE)));
  H5_CHECK(H5Tset_fields(type.get(), 15, mantissa, exponent, 0, mantissa));
  H5_CHECK(H5Tset_size(type.get(), 2));
  H5_CHECK(H5Tset_ebias(type.get(), (std::size_t{1} << (exponent - 1)) - 1));
  return type;
}

TEST(InitWeights, HuggingFaceNamesBuffersAndFloat16) {
  const auto w = weights();
  const h5::Handle half = float16_type(5, 10);
  const std::string path = write_file("hf.h5", w, "transformer.", half.get(),
                                      {{"transformer.h.0.attn.bias", {"mask", {1, 1, 16, 16}}},
                                       {"transformer.h.1.attn.masked_bias", {"mask", {}}}});
  const CheckpointReader reader(path);
  const InitWeights init = match_init_weights(reader, w.specs);
  EXPECT_EQ(init.file_name.at("h.1.mlp.c_fc.weight"), "transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(init.conversions, "float16 tensors converted to float32 (exactly)");
  std::vector<float> wte(w.values[0].size());
  reader.read(init.file_name.at("wte.weight"), wte);
  EXPECT_EQ(wte, w.values[0]);
}

TEST(InitWeights, Bfloat16IsConvertedExactly) {
  const auto w = weights();
  const h5::Handle bf16 = float16_type(8, 7);
  EXPECT_EQ(h5::describe_type(bf16.get()), "bfloat16");
  const CheckpointReader reader(write_file("bf16.h5", w, "", bf16.get()));
  const InitWeights init = match_init_weights(reader, w.specs);
  EXPECT_EQ(init.conversions, "bfloat16 tensors converted to float32 (exactly)");
  std::vector<float> wte(w.values[0].size());
  reader.read("wte.weight", wte);
  EXPECT_EQ(wte, w.values[0]);
}

TEST(InitWeights, RefusalsNameTheTensor) {
  const auto w = weights();
  const auto refusal = [&](const std::string& name, const testing::NamedTensors& tensors,
                           const std::vector<std::pair<std::string, TensorSpec>>& extra) {
    const std::string path = write_file(name, tensors, "", H5T_IEEE_F32LE, extra);
    return input_error([&] { match_init_weights(CheckpointReader(path), w.specs); });
  };
  EXPECT_NE(refusal("twice.h5", w, {{"transformer.wpe.weight", {"f", {16, 4}}}}).find("twice"),
            std::string::npos);
  EXPECT_NE(refusal("untied.h5", w, {{"lm_head.weight", {"f", {10, 4}}}}).find("ties the LM head"),
            std::string::npos);
  EXPECT_NE(refusal("extra.h5", w, {{"h.2.ln_1.weight", {"f", {4}}}})
                .find("has tensor 'h.2.ln_1.weight' of shape [4] that the model does not have"),
            std::string::npos);
  auto integer = w;
  integer.specs.erase(integer.specs.begin() + 1);
  integer.values.erase(integer.values.begin() + 1);
  EXPECT_NE(refusal("int.h5", integer, {{"wpe.weight", {"int", {16, 4}}}})
                .find("'wpe.weight' has dtype int32"),
            std::string::npos);
  auto narrow = w;
  narrow.specs[1].shape = {8, 4};
  EXPECT_NE(refusal("shape.h5", narrow, {})
                .find("'wpe.weight' has shape [8, 4] but the model expects [16, 4]"),
            std::string::npos);
}

}  // namespace
}  // namespace chimera::io
