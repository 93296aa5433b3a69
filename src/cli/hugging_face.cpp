// `chimera import-hf` and `chimera export-hf`: Hugging Face GPT-2 weights (model.safetensors +
// config.json, as GPT2LMHeadModel.save_pretrained writes them) in and out of checkpoints.
#include <filesystem>

#include "chimera/core/log.hpp"
#include "chimera/runtime/hugging_face.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {
struct ImportFlags {
  std::string safetensors;
  std::string out;
  std::string config;
};
struct ExportFlags {
  std::string checkpoint;
  std::string out_dir;
};
}  // namespace

Run add_import_hf_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "import-hf",
      "Turn a Hugging Face GPT-2 save (GPT2LMHeadModel: model.safetensors with F32, F16 or BF16\n"
      "tensors, and its config.json) into a Chimera checkpoint at step 0, for\n"
      "`chimera train --init CKPT` (or --resume, from a checkpoint directory).\n"
      "Example: chimera import-hf gpt2/model.safetensors --out gpt2.h5");
  auto f = std::make_shared<ImportFlags>();
  cmd->add_option("safetensors", f->safetensors, "The model.safetensors file")->required();
  cmd->add_option("--out", f->out, "Checkpoint file to write (HDF5)")->required();
  cmd->add_option("--config", f->config,
                  "The model's config.json (default: config.json beside the safetensors file)");
  return [f]() -> int {
    const runtime::HfImport r = runtime::import_hf(f->safetensors, f->config, f->out);
    log::info("import-hf: GPT-2 L {} C {} H {} n_ctx {} V {} from {} ({}{}{}) -> {}",
              r.model.n_layer, r.model.n_embd, r.model.n_head, r.model.n_ctx, r.model.vocab_size,
              f->safetensors, r.dtypes, r.had_lm_head ? ", lm_head tied to wte" : "",
              r.skipped_buffers > 0
                  ? fmt::format(", {} attention-mask buffers skipped", r.skipped_buffers)
                  : "",
              f->out);
    return 0;
  };
}

Run add_export_hf_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "export-hf",
      "Write a checkpoint's weights as a Hugging Face GPT-2 save: DIR/model.safetensors (F32,\n"
      "GPT2LMHeadModel names) and DIR/config.json, which transformers loads with\n"
      "GPT2LMHeadModel.from_pretrained(DIR).\n"
      "Example: chimera export-hf runs/tiny/ckpt-00000100.h5 --out gpt2-tiny");
  auto f = std::make_shared<ExportFlags>();
  cmd->add_option("checkpoint", f->checkpoint, "A Chimera checkpoint (HDF5)")->required();
  cmd->add_option("--out", f->out_dir, "Directory to write into (created if missing)")->required();
  return [f]() -> int {
    const ModelConfig m = runtime::export_hf(f->checkpoint, f->out_dir);
    log::info("export-hf: GPT-2 L {} C {} H {} n_ctx {} V {} from {} -> {}", m.n_layer, m.n_embd,
              m.n_head, m.n_ctx, m.vocab_size, f->checkpoint,
              (std::filesystem::path(f->out_dir) / "model.safetensors").string());
    return 0;
  };
}

}  // namespace chimera::cli
