#pragma once
// Hugging Face GPT-2 weights in and out of Chimera checkpoints (docs/checkpoints.md, "Hugging
// Face"). A GPT2LMHeadModel save is `model.safetensors` (tensors named `transformer.wte.weight`,
// `transformer.h.0.attn.c_attn.weight` with Conv1D's [in, out] layout, ...) and `config.json`.
// Chimera's checkpoints use the same names without the `transformer.` prefix and the same
// layouts, so both directions copy tensors as they are.
#include <map>
#include <string>
#include <vector>

#include "chimera/core/config.hpp"

namespace chimera::runtime {

// The [model] section of a Hugging Face GPT-2 config.json. InputError naming the file and key
// for anything Chimera's GPT-2 does not compute (another activation, a LayerNorm epsilon other
// than 1e-5, an untied head, ...); keys that are absent take Hugging Face's defaults.
ModelConfig read_hf_config(const std::string& config_json);

// config.json as `save_pretrained` writes it for a GPT2LMHeadModel of this shape.
std::string hf_config_json(const ModelConfig& model);

struct HfImport {
  ModelConfig model;
  std::string dtypes;        // of the weights read, e.g. "F32" or "BF16"
  bool had_lm_head = false;  // lm_head.weight was present (and equal to wte.weight)
  int skipped_buffers = 0;   // attn.bias / attn.masked_bias buffers, which are not weights
};

// The weights of a GPT2LMHeadModel save (F32, F16 or BF16), checked against its config.json
// (`config_json` empty: the one beside `safetensors`), as float32 by Chimera tensor name.
struct HfWeights {
  HfImport info;
  std::map<std::string, std::vector<float>> weights;
};
HfWeights read_hf_weights(const std::string& safetensors, const std::string& config_json);

// Reads a GPT2LMHeadModel save (F32, F16 or BF16) and writes a Chimera checkpoint at `out`: the
// weights, zero AdamW moments and step 0, which is exactly a fresh run's state, so that both
// `--init` and `--resume` take it. `config_json` empty: the config.json beside `safetensors`.
HfImport import_hf(const std::string& safetensors, const std::string& config_json,
                   const std::string& out);

// Writes `out_dir`/model.safetensors (F32, GPT2LMHeadModel names, no lm_head: it is tied, and
// `save_pretrained` leaves it out too) and `out_dir`/config.json from a Chimera checkpoint.
// Returns the model's shape.
ModelConfig export_hf(const std::string& checkpoint, const std::string& out_dir);

}  // namespace chimera::runtime
