#include "chimera/io/init_weights.hpp"

#include <cctype>
#include <cstring>
#include <set>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/h5/file.hpp"

namespace chimera::io {

namespace {

constexpr std::string_view kTransformerPrefix = "transformer.";
constexpr const char* kLmHead = "lm_head.weight";
constexpr const char* kTokenEmbedding = "wte.weight";

// "h.{i}.attn.bias" or "h.{i}.attn.masked_bias": Hugging Face's causal-mask buffers, not weights.
bool is_attention_mask_buffer(std::string_view name) {
  if (!name.starts_with("h.")) return false;
  std::size_t at = 2;
  while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) ++at;
  if (at == 2) return false;
  const std::string_view rest = name.substr(at);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

std::string without_prefix(const std::string& name) {
  return name.starts_with(kTransformerPrefix) ? name.substr(kTransformerPrefix.size()) : name;
}

}  // namespace

bool is_readable_float(const std::string& dtype) {
  return dtype == "float32" || dtype == "float16" || dtype == "bfloat16" || dtype == "float64";
}

InitWeights match_init_weights(const CheckpointReader& reader,
                               std::span<const TensorSpec> expected) {
  const std::string& path = reader.path();
  std::map<std::string, const CheckpointReader::Entry*> by_model_name;
  const CheckpointReader::Entry* lm_head = nullptr;
  const auto entries = reader.entries();
  for (const auto& e : entries) {
    const std::string name = without_prefix(e.spec.name);
    if (is_optimizer_state(e.spec.name) || is_attention_mask_buffer(name)) continue;
    if (name == kLmHead) {
      lm_head = &e;
      continue;
    }
    const auto [it, inserted] = by_model_name.emplace(name, &e);
    CHIMERA_REQUIRE(inserted, "{}: has tensor '{}' twice, as '{}' and '{}'; keep one", path, name,
                    it->second->spec.name, e.spec.name);
  }

  InitWeights init;
  std::set<std::string> converted;
  std::set<std::string> wanted;
  for (const TensorSpec& spec : expected) {
    wanted.insert(spec.name);
    const auto it = by_model_name.find(spec.name);
    CHIMERA_REQUIRE(it != by_model_name.end(),
                    "{}: has no tensor '{}' (nor '{}{}'; the model expects shape {}); was it "
                    "written for another model?",
                    path, spec.name, kTransformerPrefix, spec.name, h5::format_shape(spec.shape));
    const CheckpointReader::Entry& e = *it->second;
    CHIMERA_REQUIRE(is_readable_float(e.dtype),
                    "{}: tensor '{}' has dtype {}, expected float32 (float16, bfloat16 and float64 "
                    "are converted)",
                    path, e.spec.name, e.dtype);
    if (e.problem) throw InputError(*e.problem);
    CHIMERA_REQUIRE(e.spec.shape == spec.shape,
                    "{}: tensor '{}' has shape {} but the model expects {}; the file is of a "
                    "different model shape",
                    path, e.spec.name, h5::format_shape(e.spec.shape),
                    h5::format_shape(spec.shape));
    if (e.dtype != "float32") converted.insert(e.dtype);
    init.file_name[spec.name] = e.spec.name;
  }
  for (const auto& [name, e] : by_model_name) {
    CHIMERA_REQUIRE(wanted.contains(name),
                    "{}: has tensor '{}' of shape {} that the model does not have; the file is of "
                    "a different model shape",
                    path, e->spec.name, h5::format_shape(e->spec.shape));
  }

  if (lm_head != nullptr && init.file_name.contains(kTokenEmbedding)) {
    const std::string& wte = init.file_name.at(kTokenEmbedding);
    const auto wte_shape = by_model_name.at(kTokenEmbedding)->spec.shape;
    const auto untied = [&](const std::string& why) {
      return InputError(fmt::format(
          "{}: '{}' {}; Chimera's GPT-2 ties the LM head to the token embedding, so the head "
          "must equal '{}' (an untied head cannot be loaded)",
          path, lm_head->spec.name, why, wte));
    };
    if (lm_head->spec.shape != wte_shape || !is_readable_float(lm_head->dtype))
      throw untied(fmt::format("has shape {} and dtype {}, '{}' {} and {}",
                               h5::format_shape(lm_head->spec.shape), lm_head->dtype, wte,
                               h5::format_shape(wte_shape),
                               by_model_name.at(kTokenEmbedding)->dtype));
    std::vector<float> head(static_cast<std::size_t>(lm_head->spec.numel()));
    std::vector<float> embedding(head.size());
    reader.read(lm_head->spec.name, head);
    reader.read(wte, embedding);
    if (std::memcmp(head.data(), embedding.data(), head.size() * sizeof(float)) != 0)
      throw untied("differs from it");
  }
  if (!converted.empty()) {
    std::vector<std::string> kinds(converted.begin(), converted.end());
    init.conversions =
        fmt::format("{} tensors converted to float32 ({})", fmt::join(kinds, ", "),
                    converted.contains("float64") ? "float64 rounded to nearest" : "exactly");
  }
  return init;
}

}  // namespace chimera::io
