// `chimera inspect`: describe a token dataset, a checkpoint, a schedule JSON or a Chrome trace.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/data/describe.hpp"
#include "chimera/io/describe.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/model/partition.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

// The GPT-2 whose weights a file's tensors look like: V and C from wte.weight, n_ctx from
// wpe.weight, n_layer from the h.{i} names (with or without Hugging Face's "transformer."
// prefix). n_head shapes no tensor, so any divisor of n_embd would do.
io::ModelGuess guess_gpt2(const io::CheckpointReader& reader) {
  std::optional<std::vector<std::int64_t>> wte, wpe;
  int n_layer = 0;
  for (const auto& e : reader.entries()) {
    std::string name = e.spec.name;
    if (name.starts_with("transformer.")) name = name.substr(std::string("transformer.").size());
    if (name == "wte.weight") wte = e.spec.shape;
    if (name == "wpe.weight") wpe = e.spec.shape;
    int block = -1;
    if (std::sscanf(name.c_str(), "h.%d.", &block) == 1) n_layer = std::max(n_layer, block + 1);
  }
  CHIMERA_REQUIRE(wte && wpe && wte->size() == 2 && wpe->size() == 2 && n_layer > 0,
                  "{}: no GPT-2 weights (2-D wte.weight and wpe.weight and blocks h.0, h.1, ...)",
                  reader.path());
  ModelConfig shape;
  shape.n_layer = n_layer;
  shape.n_embd = static_cast<int>((*wte)[1]);
  shape.n_head = 1;
  shape.n_ctx = static_cast<int>((*wpe)[0]);
  shape.vocab_size = static_cast<int>((*wte)[0]);
  const auto config = model::GPT2Config::from(shape);
  const model::ParameterLayout layout(config, model::balanced_partition(config, 1, config.n_ctx));
  io::ModelGuess guess;
  for (const auto* t : layout.all()) guess.weights.push_back({t->name, t->shape});
  guess.description = fmt::format("n_layer={} n_embd={} n_ctx={} vocab_size={}", config.n_layer,
                                  config.n_embd, config.n_ctx, config.vocab_size);
  return guess;
}

struct InspectOptions {
  std::vector<std::string> files;
  data::DatasetDescribeOptions dataset;
  io::CheckpointDescribeOptions checkpoint;
  bool decode_all = false;
  bool skip_norms = false;
};
}  // namespace

Run add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "Describe files by their content: a token dataset (tokens, samples per T, vocabulary, a\n"
      "decoded snippet), a directory from `chimera prep` (its splits and shards), a checkpoint\n"
      "(step, config, tensor table with shapes and norms), a schedule JSON (scheme, sizes, ops\n"
      "per worker) or a Chrome trace (busy time per rank)");
  auto o = std::make_shared<InspectOptions>();
  o->dataset.tokenizer_dir = "inputs/gpt2-tokenizer";
  cmd->add_option("files", o->files, "Files (or prep output directories) to describe")->required();
  cmd->add_option("--tokenizer", o->dataset.tokenizer_dir,
                  "Datasets: GPT-2 tokenizer directory for decoding (ids only if unavailable)")
      ->capture_default_str();
  cmd->add_option("--seq-len,-T", o->dataset.seq_len,
                  "Datasets: count samples for this sequence length only (default, or 0: "
                  "64..1024)");
  cmd->add_option("--offset", o->dataset.offset, "Datasets: first token of the snippet")
      ->capture_default_str();
  cmd->add_option("--tokens", o->dataset.tokens, "Datasets: tokens in the snippet (0 = none)")
      ->capture_default_str();
  cmd->add_flag("--decode-all", o->decode_all,
                "Datasets: print the whole dataset decoded back to text, and nothing else");
  cmd->add_flag("--config", o->checkpoint.show_config, "Checkpoints: print the full TOML config");
  cmd->add_flag("--no-norms", o->skip_norms,
                "Checkpoints: do not read tensors to print their L2 norms (faster)");

  return [o]() -> int {
    CHIMERA_REQUIRE(o->dataset.seq_len >= 0,
                    "--seq-len (-T) {}: must be >= 0 (0 = count samples for T = 64..1024)",
                    o->dataset.seq_len);
    CHIMERA_REQUIRE(o->dataset.offset >= 0, "--offset {}: must be >= 0 (a token position)",
                    o->dataset.offset);
    CHIMERA_REQUIRE(o->dataset.tokens >= 0, "--tokens {}: must be >= 0 (0 = no snippet)",
                    o->dataset.tokens);
    o->checkpoint.norms = !o->skip_norms;
    o->checkpoint.guess_model = guess_gpt2;
    for (const std::string& file : o->files) {
      std::string text;
      std::error_code ec;
      if (std::filesystem::is_directory(file, ec)) {
        text = data::describe_dataset_directory(file, o->dataset);
        std::fwrite(text.data(), 1, text.size(), stdout);
        continue;
      }
      switch (io::detect_file_kind(file)) {
        case io::FileKind::TokenDataset:
          text = o->decode_all ? data::decode_dataset(file, o->dataset.tokenizer_dir)
                               : data::describe_dataset(file, o->dataset);
          break;
        case io::FileKind::Checkpoint:
          text = io::describe_checkpoint(file, o->checkpoint);
          break;
        case io::FileKind::ScheduleJson:
          text = io::describe_schedule_json(file);
          break;
        case io::FileKind::TraceJson:
          text = io::describe_trace_json(file);
          break;
      }
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    return 0;
  };
}

}  // namespace chimera::cli
