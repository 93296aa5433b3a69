// `chimera sample`: continue a prompt with a checkpoint's GPT-2, on one process and the CPU.
#include <cstdio>
#include <optional>

#include "chimera/backend/backend.hpp"
#include "chimera/core/error.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/runtime/train_state.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

struct SampleFlags {
  std::string checkpoint;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  int tokens = 64;
  model::SamplingOptions sampling;
  bool ids = false;
  std::string tokenizer = "inputs/gpt2-tokenizer";
};

}  // namespace

Run add_sample_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sample",
      "Continue a prompt with a checkpoint's GPT-2, on one process with the CPU backend, and\n"
      "print the prompt and its continuation (decoded with GPT-2's tokenizer when the model's\n"
      "vocabulary is GPT-2's 50257 tokens, else as ids). Each new token recomputes the whole\n"
      "window (no KV cache): meant for short samples.\n"
      "Example: chimera sample ckpt.h5 --prompt \"It is a truth\" --tokens 40 --top-k 40");
  auto f = std::make_shared<SampleFlags>();
  cmd->add_option("checkpoint", f->checkpoint, "A Chimera checkpoint (HDF5)")->required();
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
    const io::CheckpointReader reader(f->checkpoint);
    const ModelConfig model = Config::from_toml(reader.meta().config, f->checkpoint).model;
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
    std::vector<io::TensorSpec> specs;
    for (const auto* t : worker.layout().all()) specs.push_back({t->name, t->shape});
    reader.expect(specs);
    runtime::read_weights(reader, worker);

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
