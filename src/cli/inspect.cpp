// `chimera inspect`: describe a token dataset, a checkpoint, a schedule JSON or a Chrome trace.
#include <cstdio>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/data/describe.hpp"
#include "chimera/io/describe.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {
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
      "decoded snippet), a checkpoint (step, config, tensor table with shapes and norms), a\n"
      "schedule JSON (scheme, sizes, ops per worker) or a Chrome trace (busy time per rank)");
  auto o = std::make_shared<InspectOptions>();
  o->dataset.tokenizer_dir = "inputs/gpt2-tokenizer";
  cmd->add_option("files", o->files, "Files to describe")->required();
  cmd->add_option("--tokenizer", o->dataset.tokenizer_dir,
                  "Datasets: GPT-2 tokenizer directory for decoding (ids only if unavailable)")
      ->capture_default_str();
  cmd->add_option("--seq-len,-T", o->dataset.seq_len,
                  "Datasets: count samples for this sequence length only (default: 64..1024)");
  cmd->add_option("--offset", o->dataset.offset, "Datasets: first token of the snippet")
      ->capture_default_str();
  cmd->add_option("--tokens", o->dataset.tokens, "Datasets: tokens in the snippet")
      ->capture_default_str();
  cmd->add_flag("--decode-all", o->decode_all,
                "Datasets: print the whole dataset decoded back to text, and nothing else");
  cmd->add_flag("--config", o->checkpoint.show_config, "Checkpoints: print the full TOML config");
  cmd->add_flag("--no-norms", o->skip_norms,
                "Checkpoints: do not read tensors to print their L2 norms (faster)");

  return [o]() -> int {
    o->checkpoint.norms = !o->skip_norms;
    for (const std::string& file : o->files) {
      std::string text;
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
