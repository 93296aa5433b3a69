// Hugging Face GPT-2 saves (model.safetensors + config.json) to and from Chimera checkpoints.
#include "chimera/runtime/hugging_face.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/core/files.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/paths.hpp"
#include "chimera/io/safetensors.hpp"
#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/parameters.hpp"

namespace chimera::runtime {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kPrefix = "transformer.";
constexpr std::string_view kLmHead = "lm_head.weight";
constexpr int kGpt2EndOfText = 50256;
constexpr double kLayerNormEps = 1e-5;  // the backend's LayerNorm

// The whole model on one stage: the names, shapes and order of every tensor.
model::ParameterLayout layout_of(const ModelConfig& model) {
  const auto config = model::GPT2Config::from(model);
  return model::ParameterLayout(config, model::StagePartition({config.n_layer}));
}

int positive_int(const Json& config, const char* key, int fallback, const std::string& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  CHIMERA_REQUIRE(it->is_number_integer() && it->get<std::int64_t>() >= 1 &&
                      it->get<std::int64_t>() <= (1 << 30),
                  "{}: \"{}\" = {} must be a positive integer", path, key, it->dump());
  return it->get<int>();
}

// A key whose value Chimera's GPT-2 cannot differ from: absent, or equal to `expected`.
void require_value(const Json& config, const char* key, const Json& expected,
                   const std::string& path, std::string_view why) {
  const auto it = config.find(key);
  if (it == config.end()) return;
  CHIMERA_REQUIRE(*it == expected, "{}: \"{}\" = {} is not supported: Chimera's GPT-2 {} ({})",
                  path, key, it->dump(), why, expected.dump());
}

std::string beside(const std::string& file, const char* name) {
  return (fs::path(file).parent_path() / name).string();
}

// Chimera's name for a tensor of a Hugging Face save (with or without `transformer.`).
std::string chimera_name(std::string_view hf) {
  return std::string(hf.starts_with(kPrefix) ? hf.substr(kPrefix.size()) : hf);
}

// The causal-mask buffers older transformers versions saved with the weights.
bool is_attention_buffer(std::string_view name) {
  return name.starts_with("h.") &&
         (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  require_not_a_directory(path, "a Hugging Face config.json");
  std::ifstream in(path);
  CHIMERA_REQUIRE(in.good(),
                  "{}: cannot read the Hugging Face config.json (pass --config FILE when it is "
                  "not beside the safetensors file)",
                  path);
  Json config;
  try {
    config = Json::parse(in);
  } catch (const Json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {})", path, e.byte));
  }
  CHIMERA_REQUIRE(config.is_object(), "{}: a config.json must be a JSON object", path);
  require_value(config, "model_type", "gpt2", path, "is a GPT-2");
  if (const auto it = config.find("activation_function"); it != config.end()) {
    // gelu_pytorch_tanh is the same tanh approximation, computed by another kernel.
    CHIMERA_REQUIRE(*it == "gelu_new" || *it == "gelu_pytorch_tanh",
                    "{}: \"activation_function\" = {} is not supported: Chimera's GPT-2 uses the "
                    "tanh GELU (\"gelu_new\")",
                    path, it->dump());
  }
  if (const auto it = config.find("layer_norm_epsilon"); it != config.end()) {
    CHIMERA_REQUIRE(it->is_number() && std::abs(it->get<double>() - kLayerNormEps) <= 1e-12,
                    "{}: \"layer_norm_epsilon\" = {} is not supported: Chimera's LayerNorm uses "
                    "1e-5",
                    path, it->dump());
  }
  require_value(config, "tie_word_embeddings", true, path, "ties the LM head to wte");
  require_value(config, "scale_attn_weights", true, path, "scales attention by 1/sqrt(head size)");
  require_value(config, "scale_attn_by_inverse_layer_idx", false, path,
                "does not scale attention by layer");
  require_value(config, "add_cross_attention", false, path, "has no cross-attention");

  ModelConfig m;
  m.n_layer = positive_int(config, "n_layer", 12, path);
  m.n_embd = positive_int(config, "n_embd", 768, path);
  m.n_head = positive_int(config, "n_head", 12, path);
  m.n_ctx = positive_int(config, "n_positions", positive_int(config, "n_ctx", 1024, path), path);
  m.vocab_size = positive_int(config, "vocab_size", data::kGpt2VocabSize, path);
  if (const auto it = config.find("n_inner"); it != config.end() && !it->is_null()) {
    CHIMERA_REQUIRE(*it == 4 * m.n_embd,
                    "{}: \"n_inner\" = {} is not supported: Chimera's MLP is 4 * n_embd = {} wide",
                    path, it->dump(), 4 * m.n_embd);
  }
  try {
    (void)model::GPT2Config::from(m);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  return m;
}

std::string hf_config_json(const ModelConfig& m) {
  const bool gpt2_vocab = m.vocab_size == data::kGpt2VocabSize;
  const Json end_of_text = gpt2_vocab ? Json(kGpt2EndOfText) : Json(nullptr);
  // Dropout 0: Chimera trains without dropout, so these weights were trained without it.
  const Json config = {
      {"activation_function", "gelu_new"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"attn_pdrop", 0.0},
      {"bos_token_id", end_of_text},
      {"embd_pdrop", 0.0},
      {"eos_token_id", end_of_text},
      {"initializer_range", 0.02},
      {"layer_norm_epsilon", kLayerNormEps},
      {"model_type", "gpt2"},
      {"n_ctx", m.n_ctx},
      {"n_embd", m.n_embd},
      {"n_head", m.n_head},
      {"n_inner", nullptr},
      {"n_layer", m.n_layer},
      {"n_positions", m.n_ctx},
      {"reorder_and_upcast_attn", false},
      {"resid_pdrop", 0.0},
      {"scale_attn_by_inverse_layer_idx", false},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
      {"use_cache", true},
      {"vocab_size", m.vocab_size},
  };
  return config.dump(2) + "\n";
}

HfWeights read_hf_weights(const std::string& safetensors, const std::string& config_json) {
  const std::string config_path =
      config_json.empty() ? beside(safetensors, "config.json") : config_json;
  const io::SafetensorsReader reader(safetensors);
  HfImport result;
  result.model = read_hf_config(config_path);
  const model::ParameterLayout layout = layout_of(result.model);
  const auto shape_text = [](const std::vector<std::int64_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
  };

  std::map<std::string, std::vector<float>> weights;
  std::set<std::string> dtypes;
  const io::SafetensorsEntry* lm_head = nullptr;
  for (const auto& entry : reader.tensors()) {
    const std::string name = chimera_name(entry.name);
    if (is_attention_buffer(name)) {
      ++result.skipped_buffers;
      continue;
    }
    if (name == kLmHead) {
      lm_head = &entry;
      continue;
    }
    const model::TensorInfo* t = layout.find(name);
    CHIMERA_REQUIRE(t != nullptr,
                    "{}: tensor '{}' is not a parameter of a GPT-2 with n_layer = {} (expected "
                    "names like transformer.h.0.attn.c_attn.weight)",
                    safetensors, entry.name, result.model.n_layer);
    CHIMERA_REQUIRE(!weights.contains(name), "{}: holds '{}' twice (with and without '{}')",
                    safetensors, name, kPrefix);
    CHIMERA_REQUIRE(entry.shape == t->shape,
                    "{}: tensor '{}' has shape {} but the config (n_embd = {}, n_ctx = {}, "
                    "vocab_size = {}) gives {}",
                    safetensors, entry.name, shape_text(entry.shape), result.model.n_embd,
                    result.model.n_ctx, result.model.vocab_size, shape_text(t->shape));
    weights[name] = reader.read_f32(entry);
    dtypes.insert(entry.dtype);
  }
  for (const auto* t : layout.all()) {
    CHIMERA_REQUIRE(weights.contains(t->name), "{}: has no tensor '{}{}' (shape {})", safetensors,
                    kPrefix, t->name, shape_text(t->shape));
  }
  if (lm_head != nullptr) {
    const std::vector<float> head = reader.read_f32(*lm_head);
    const std::vector<float>& wte = weights.at("wte.weight");
    CHIMERA_REQUIRE(head.size() == wte.size() &&
                        std::memcmp(head.data(), wte.data(), wte.size() * sizeof(float)) == 0,
                    "{}: lm_head.weight differs from transformer.wte.weight; Chimera's GPT-2 "
                    "ties the LM head to the token embedding",
                    safetensors);
    result.had_lm_head = true;
  }
  result.dtypes = fmt::format("{}", fmt::join(dtypes, ", "));
  return {result, std::move(weights)};
}

HfImport import_hf(const std::string& safetensors, const std::string& config_json,
                   const std::string& out) {
  io::require_not_an_input(
      out, {safetensors, config_json.empty() ? beside(safetensors, "config.json") : config_json});
  const auto [result, weights] = read_hf_weights(safetensors, config_json);
  const model::ParameterLayout layout = layout_of(result.model);

  // Weights in the model's order, then zero moments: the optimizer state of a fresh run.
  std::size_t largest = 0;
  for (const auto* t : layout.all()) largest = std::max(largest, t->numel);
  const std::vector<float> zeros(largest, 0.0F);
  std::vector<io::TensorData> tensors;
  for (const auto* t : layout.all()) {
    tensors.push_back({{t->name, t->shape}, weights.at(t->name)});
  }
  for (const auto* t : layout.all()) {
    const std::span<const float> zero(zeros.data(), t->numel);
    tensors.push_back({{io::exp_avg_name(t->name), t->shape}, zero});
    tensors.push_back({{io::exp_avg_sq_name(t->name), t->shape}, zero});
  }
  Config config;
  config.model = result.model;
  const io::CheckpointMeta meta{0, config.train.seed, 0, config.to_toml()};
  io::write_via_temporary(out, [&](const std::string& temporary) {
    io::write_checkpoint_file(MPI_COMM_SELF, temporary, tensors, meta);
  });
  return result;
}

ModelConfig export_hf(const std::string& checkpoint, const std::string& out_dir) {
  const io::CheckpointReader reader(checkpoint);
  const ModelConfig model = Config::from_toml(reader.meta().config, checkpoint).model;
  const model::ParameterLayout layout = layout_of(model);
  std::vector<io::TensorSpec> specs;
  for (const auto* t : layout.all()) specs.push_back({t->name, t->shape});
  reader.expect(specs);

  std::vector<std::vector<float>> values;
  values.reserve(specs.size());
  std::vector<io::SafetensorsTensor> tensors;
  for (const auto& spec : specs) {
    values.emplace_back(static_cast<std::size_t>(spec.numel()));
    reader.read(spec.name, values.back());
    tensors.push_back({std::string(kPrefix) + spec.name, spec.shape, values.back()});
  }
  const std::string safetensors = (fs::path(out_dir) / "model.safetensors").string();
  const std::string config_path = (fs::path(out_dir) / "config.json").string();
  io::require_not_an_input(safetensors, {checkpoint});
  io::require_not_an_input(config_path, {checkpoint});
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  CHIMERA_REQUIRE(!ec, "{}: cannot create the directory ({})", out_dir, ec.message());
  io::write_safetensors(safetensors, tensors, {{"format", "pt"}});
  std::ofstream config(config_path, std::ios::trunc);
  config << hf_config_json(model);
  config.flush();
  CHIMERA_REQUIRE(config.good(), "{}: cannot write the file", config_path);
  return model;
}

}  // namespace chimera::runtime
