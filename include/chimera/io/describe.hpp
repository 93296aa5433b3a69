#pragma once
// What `chimera inspect` prints about the files Chimera writes: recognition of a file's kind, and
// human-readable descriptions of checkpoints, schedule JSON and Chrome traces. (Token datasets
// are described by data/describe.hpp, which knows the tokenizer.)
#include <functional>
#include <string>
#include <vector>

#include "chimera/io/checkpoint.hpp"

namespace chimera::io {

enum class FileKind { TokenDataset, Checkpoint, ScheduleJson, TraceJson };

// Recognises a file by content. InputError when it is missing or none of the kinds.
FileKind detect_file_kind(const std::string& path);

// The GPT-2 a file of tensors would initialise, as the caller (who knows the model module) reads
// it from the tensors' names and shapes: the weights such a model has, and its shape in words.
struct ModelGuess {
  std::vector<TensorSpec> weights;
  std::string description;  // "n_layer=2 n_embd=32 n_ctx=16 vocab_size=96"
};

struct CheckpointDescribeOptions {
  bool show_config = false;  // print the full TOML config
  bool norms = true;         // read every tensor to print its L2 norm
  // When set, the description says whether `train --init` takes the file, by the check --init
  // runs (match_init_weights) for the guessed model. InputError when no GPT-2 fits the names.
  std::function<ModelGuess(const CheckpointReader&)> guess_model;
};
std::string describe_checkpoint(const std::string& path, const CheckpointDescribeOptions& options);

// Schedule JSON (DESIGN §3): scheme, sizes, placement, and the ops of every worker.
std::string describe_schedule_json(const std::string& path);
// Chrome trace (DESIGN §5): ranks, time span, and busy time per rank and lane.
std::string describe_trace_json(const std::string& path);

}  // namespace chimera::io
