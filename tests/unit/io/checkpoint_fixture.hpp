#pragma once
// A small GPT-2-like set of named tensors with deterministic values, for checkpoint tests.
#include <cmath>
#include <string>
#include <vector>

#include "chimera/io/checkpoint.hpp"

namespace chimera::io::testing {

struct NamedTensors {
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> values;

  std::vector<TensorData> all() const {
    std::vector<TensorData> t;
    for (std::size_t i = 0; i < specs.size(); ++i) t.push_back({specs[i], values[i]});
    return t;
  }
};

// Values depend on the tensor's index and a `version`, never on who writes them.
inline NamedTensors gpt2_like(int n_layer, int C, int vocab, float version = 0) {
  NamedTensors t;
  std::vector<TensorSpec> weights{{"wte.weight", {vocab, C}}, {"wpe.weight", {16, C}}};
  for (int l = 0; l < n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    weights.push_back({h + "ln_1.weight", {C}});
    weights.push_back({h + "attn.c_attn.weight", {C, 3 * C}});
    weights.push_back({h + "attn.c_attn.bias", {3 * C}});
    weights.push_back({h + "mlp.c_fc.weight", {C, 4 * C}});
  }
  weights.push_back({"ln_f.bias", {C}});
  t.specs = weights;
  for (const auto& w : weights) t.specs.push_back({exp_avg_name(w.name), w.shape});
  for (const auto& w : weights) t.specs.push_back({exp_avg_sq_name(w.name), w.shape});
  for (std::size_t i = 0; i < t.specs.size(); ++i) {
    std::vector<float> v(static_cast<std::size_t>(t.specs[i].numel()));
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = std::sin(static_cast<float>(i * 131 + k) * 0.37f) + version;
    t.values.push_back(std::move(v));
  }
  return t;
}

// Whether the checkpoint at `path` holds exactly `expected`'s tensors and values.
inline bool file_holds(const std::string& path, const NamedTensors& expected) {
  const CheckpointReader reader(path);
  reader.expect(expected.specs);
  for (std::size_t i = 0; i < expected.specs.size(); ++i) {
    std::vector<float> v(expected.values[i].size());
    reader.read(expected.specs[i].name, v);
    if (v != expected.values[i]) return false;
  }
  return true;
}

}  // namespace chimera::io::testing
