// `chimera prep`: tokenize text files with GPT-2's BPE into HDF5 token datasets (DESIGN §5).
#include <unistd.h>

#include <cstdio>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/data/prep.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

// A one-line progress bar on stderr, redrawn at most five times a second, only on a terminal
// and only once the input is large enough for it to matter.
class ProgressBar {
 public:
  void update(const data::PrepProgress& p) {
    constexpr std::uint64_t kMinBytes = std::uint64_t{8} << 20;
    if (p.disk_total < kMinBytes || isatty(STDERR_FILENO) == 0) return;
    if (last_draw_ >= 0 && clock_.seconds() - last_draw_ < 0.2 && p.disk_bytes < p.disk_total)
      return;
    last_draw_ = clock_.seconds();
    const double fraction = static_cast<double>(p.disk_bytes) / static_cast<double>(p.disk_total);
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    const double mb = static_cast<double>(p.text_bytes) / 1e6;
    std::fprintf(stderr, "\rprep [%s%s] %3.0f%%  %.1f MB of text  %.1f MB/s ",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
                 fraction * 100, mb, mb / std::max(clock_.seconds(), 1e-9));
    drawn_ = true;
  }
  ~ProgressBar() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  Stopwatch clock_;
  double last_draw_ = -1;
  bool drawn_ = false;
};

}  // namespace

Run add_prep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "prep",
      "Tokenize text files with GPT-2's byte-level BPE into HDF5 token datasets\n"
      "(<output>/train.h5 and <output>/val.h5). Each file is one document, and a literal\n"
      "<|endoftext|> in a file also ends a document; every document starts with the\n"
      "end-of-text token. Files ending in .gz are read compressed.");
  auto options = std::make_shared<data::PrepOptions>();
  auto invalid = std::make_shared<std::string>("error");
  cmd->add_option("--tokenizer", options->tokenizer_dir,
                  "Directory with GPT-2's encoder.json and vocab.bpe (e.g. inputs/gpt2-tokenizer)")
      ->required();
  cmd->add_option("--output", options->output_dir,
                  "Directory to write train.h5 and val.h5 into (created if missing)")
      ->required();
  cmd->add_option("files", options->inputs, "UTF-8 text files (plain or .gz)")->required();
  cmd->add_option("--val-fraction", options->val_fraction,
                  "Fraction of the tokens that go to the validation split, taken as the end of "
                  "every split block; 0 writes train.h5 only")
      ->capture_default_str();
  cmd->add_option("--split-block", options->split_block,
                  "Tokens per split block: the last val-fraction of each block is validation "
                  "data, so validation text is spread over the whole corpus")
      ->capture_default_str();
  cmd->add_option("--invalid-utf8", *invalid,
                  "What to do with bytes that are not valid UTF-8: 'error' stops and names the "
                  "file and byte offset; 'replace' substitutes U+FFFD for each invalid sequence "
                  "(as Python's errors=\"replace\")")
      ->check(CLI::IsMember({"error", "replace"}))
      ->capture_default_str();

  return [options, invalid]() -> int {
    options->invalid_utf8 =
        *invalid == "replace" ? data::InvalidUtf8::Replace : data::InvalidUtf8::Error;
    auto bar = std::make_shared<ProgressBar>();
    options->on_progress = [bar](const data::PrepProgress& p) { bar->update(p); };
    const data::PrepResult result = data::prepare_dataset(*options);
    bar.reset();
    options->on_progress = nullptr;
    const double mb = static_cast<double>(result.text_bytes) / 1e6;
    log::info(
        "prep: {} documents, {:.2f} MB of text -> {} train tokens ({}){} in {:.2f} s "
        "({:.1f} MB/s)",
        result.documents, mb, result.train_tokens, result.train_path,
        result.val_path.empty()
            ? std::string()
            : fmt::format(", {} val tokens ({})", result.val_tokens, result.val_path),
        result.seconds, mb / std::max(result.seconds, 1e-9));
    return 0;
  };
}

}  // namespace chimera::cli
