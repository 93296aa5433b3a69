// `chimera sample`: continue a prompt with a checkpoint's GPT-2, on one process and the CPU.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "chimera/backend/backend.hpp"
#include "chimera/core/error.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/init_weights.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/runtime/hugging_face.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

struct SampleFlags {
  std::string checkpoint;
  std::string config;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  int tokens = 64;
  model::SamplingOptions sampling;
  bool ids = false;
  std::string tokenizer = "inputs/gpt2-tokenizer";
};

// What `chimera sample` reads: the model's shape, and how to put the weights into a worker.
struct WeightSource {
  ModelConfig model;
  std::function<void(model::GPT2Worker&)> load;
};

// A Hugging Face save: DIR (with model.safetensors and config.json) or the .safetensors file.
WeightSource hugging_face_source(const std::string& safetensors) {
  auto hf = std::make_shared<runtime::HfWeights>(runtime::read_hf_weights(safetensors, ""));
  return {hf->info.model, [hf](model::GPT2Worker& worker) {
            for (const auto* t : worker.tensors()) {
              worker.write_tensor(*t, worker.params_of(*t), hf->weights.at(t->name));
            }
          }};
}

// A Chimera checkpoint, or any HDF5 file of GPT-2 tensors that `--init` takes; the shape from
// `config_file` when given, else from the checkpoint's own config.
WeightSource hdf5_source(const std::string& path, const std::string& config_file) {
  auto reader = std::make_shared<io::CheckpointReader>(path);
  ModelConfig model;
  if (!config_file.empty()) {
    model = Config::from_file(config_file).model;
  } else {
    CHIMERA_REQUIRE(reader->is_chimera_checkpoint(),
                    "{} holds GPT-2 tensors but no Chimera config, and tensor shapes do not give "
                    "n_head: pass --config RUN.toml with the [model] it was trained with",
                    path);
    model = Config::from_toml(reader->meta().config, path).model;
  }
  return {model, [reader, path](model::GPT2Worker& worker) {
            std::vector<io::TensorSpec> specs;
            for (const auto* t : worker.layout().all()) specs.push_back({t->name, t->shape});
            const io::InitWeights init = io::match_init_weights(*reader, specs);
            for (const auto* t : worker.tensors()) {
              std::vector<float> host(t->numel);
              reader->read(init.file_name.at(t->name), host);
              worker.write_tensor(*t, worker.params_of(*t), host);
            }
          }};
}

WeightSource open_weights(const std::string& path, const std::string& config_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path safetensors = fs::path(path) / "model.safetensors";
    CHIMERA_REQUIRE(fs::exists(safetensors, ec),
                    "{} is a directory without model.safetensors (a Hugging Face save holds "
                    "model.safetensors and config.json)",
                    path);
    return hugging_face_source(safetensors.string());
  }
  CHIMERA_REQUIRE(fs::exists(path, ec), "{}: no such file or directory", path);
  if (fs::path(path).extension() == ".safetensors") return hugging_face_source(path);
  return hdf5_source(path, config_file);
}

}  // namespace

Run add_sample_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sample",
      "Continue a prompt with a GPT-2, on one process with the CPU backend, and print the\n"
      "prompt and its continuation (decoded with GPT-2's tokenizer when the model's vocabulary\n"
      "is GPT-2's 50257 tokens, else as ids). The prompt runs once; each new token computes one\n"
      "position against the cached keys and values of the earlier ones (until the window of\n"
      "n_ctx tokens is full; then the cache is rebuilt from the last n_ctx tokens per token).\n"
      "Example: chimera sample ckpt.h5 --prompt \"It is a truth\" --tokens 40 --top-k 40");
  auto f = std::make_shared<SampleFlags>();
  cmd->add_option("weights", f->checkpoint,
                  "A Chimera checkpoint; any HDF5 file of GPT-2 tensors that train --init takes "
                  "(with --config); or a Hugging Face save: its directory (model.safetensors + "
                  "config.json) or its model.safetensors")
      ->required();
  cmd->add_option("--config", f->config,
                  "Run config (TOML) whose [model] gives the shape of an HDF5 weights file "
                  "without Chimera's metadata (a Chimera checkpoint carries its own)");
  auto* prompt_flag =
      cmd->add_option("--prompt", f->prompt,
                      "Text to continue (GPT-2 vocabulary only); a prompt longer than "
                      "the model's n_ctx keeps its last n_ctx tokens");
  cmd->add_option("--prompt-ids", f->prompt_ids,
                  "Token ids to continue, e.g. \"464 3290 318\" (any vocabulary)")
      ->excludes(prompt_flag);
  cmd->add_option("--tokens", f->tokens, "New tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", f->sampling.temperature,
                  "Softmax temperature; 0 picks the most likely token (greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", f->sampling.top_k, "Sample among the K most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--seed", f->sampling.seed,
                  "Seed of the sampling: the same seed gives the same text")
      ->capture_default_str();
  cmd->add_flag("--ids", f->ids, "Print the generated ids on one line instead of decoded text");
  cmd->add_option("--tokenizer", f->tokenizer, "Directory with GPT-2's encoder.json and vocab.bpe")
      ->capture_default_str();

  return [f]() -> int {
    CHIMERA_REQUIRE(f->prompt || f->prompt_ids,
                    "chimera sample needs a prompt: --prompt TEXT or --prompt-ids \"ID ID ...\"");
    CHIMERA_REQUIRE(f->tokens >= 1, "--tokens {} must be at least 1", f->tokens);
    f->sampling.validate();
    const WeightSource source = open_weights(f->checkpoint, f->config);
    const ModelConfig& model = source.model;
    const bool gpt2_vocab = model.vocab_size == data::kGpt2VocabSize;
    CHIMERA_REQUIRE(!f->prompt || gpt2_vocab,
                    "--prompt needs GPT-2's vocabulary of {} tokens, but {} has vocab_size = {}: "
                    "pass token ids with --prompt-ids",
                    data::kGpt2VocabSize, f->checkpoint, model.vocab_size);
    std::optional<data::Tokenizer> tokenizer;
    if (gpt2_vocab && (f->prompt || !f->ids)) tokenizer = data::Tokenizer::load(f->tokenizer);
    const std::vector<std::int32_t> prompt =
        f->prompt ? tokenizer->encode(*f->prompt)
                  : model::parse_token_ids(*f->prompt_ids, model.vocab_size, "--prompt-ids");
    CHIMERA_REQUIRE(!prompt.empty(), "the prompt is empty: give at least one token");

    const auto config = model::GPT2Config::from(model);
    const model::StagePartition whole({config.n_layer});
    const auto window = static_cast<int>(
        std::min<std::size_t>(static_cast<std::size_t>(config.n_ctx), prompt.size() + f->tokens));
    const auto backend = backend::make_backend(BackendKind::Cpu);
    model::GPT2Worker worker(*backend, config, whole, {0}, {1, window, false});
    source.load(worker);

    model::TokenSampler sampler(f->sampling);
    const auto generated = model::generate(worker, prompt, f->tokens, sampler);
    std::string out;
    if (f->ids || !tokenizer) {
      for (std::size_t i = 0; i < generated.size(); ++i) {
        out += fmt::format("{}{}", i > 0 ? " " : "", generated[i]);
      }
    } else {
      std::vector<std::int32_t> all(prompt);
      all.insert(all.end(), generated.begin(), generated.end());
      out = tokenizer->decode(all);
    }
    out += "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace chimera::cli
