#pragma once
// `chimera train --init FILE`: where each of the model's weights is in a file of GPT-2 tensors.
// The file may be a Chimera checkpoint (its optimizer state is ignored) or any HDF5 file of
// GPT-2 tensors with Hugging Face names, without Chimera's attributes (docs/checkpoints.md):
//  - names with or without the `transformer.` prefix of GPT2LMHeadModel's state dict;
//  - the attention-mask buffers `h.{i}.attn.bias` and `h.{i}.attn.masked_bias` are skipped;
//  - `lm_head.weight`, if present, must equal `wte.weight` exactly: Chimera's head is tied;
//  - float32, or float16 / bfloat16 (converted to float32 exactly), or float64 (rounded to the
//    nearest float32).
// `chimera inspect` calls the same function, so it says "usable with --init" exactly when
// --init accepts the file for that model shape.
#include <map>
#include <span>
#include <string>

#include "chimera/io/checkpoint.hpp"

namespace chimera::io {

struct InitWeights {
  std::map<std::string, std::string> file_name;  // model tensor name -> dataset name in the file
  // "" or what was converted, e.g. "float16 tensors converted to float32 (exactly)".
  std::string conversions;
};

// Checks the file against the model's weights `expected` (names and Hugging Face shapes): every
// weight present once, of a float type, with its shape; no tensor the model lacks; a tied
// lm_head. InputError naming the file and the tensor otherwise.
InitWeights match_init_weights(const CheckpointReader& reader,
                               std::span<const TensorSpec> expected);

// float32, float16, bfloat16, float64: the tensor dtypes a reader converts to float32.
bool is_readable_float(const std::string& dtype);

}  // namespace chimera::io
