// `chimera prep`: tokenize a corpus with GPT-2's BPE into HDF5 token datasets (DESIGN §5).
#include <hdf5.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/data/prep.hpp"
#include "commands.hpp"

namespace chimera::cli {

namespace {

// The CPUs this process may run on (its affinity mask: what a batch job was given).
int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string human_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  return fmt::format("{:.1f} MB", bytes / 1e6);
}

std::string human_duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// Progress on stderr: on a terminal one line redrawn in place (twice a second); otherwise (a job
// log) one line every `interval` seconds.
class ProgressReport {
 public:
  explicit ProgressReport(double interval)
      : terminal_(isatty(STDERR_FILENO) != 0), interval_(terminal_ ? 0.5 : interval) {}
  ProgressReport(const ProgressReport&) = delete;
  ProgressReport& operator=(const ProgressReport&) = delete;

  void update(const data::PrepProgress& p) {
    if (!first_) first_ = p;
    if (p.seconds - last_ < interval_) return;
    last_ = p.seconds;
    const double rate = static_cast<double>(p.text_bytes) / std::max(p.seconds, 1e-9);
    std::string line =
        fmt::format("prep: {} of {} read ({:.1f}%), {} documents, {:.1f} M tokens, {:.1f} MB/s",
                    human_bytes(static_cast<double>(p.disk_bytes)),
                    human_bytes(static_cast<double>(p.disk_total)),
                    100.0 * static_cast<double>(p.disk_bytes) / std::max<double>(1, p.disk_total),
                    p.documents, static_cast<double>(p.tokens) / 1e6, rate / 1e6);
    // Time left from the pace of input bytes on disk since the first report (compressed for
    // .gz/.zst, whose uncompressed size is not known in advance).
    const double done = static_cast<double>(p.disk_bytes - first_->disk_bytes);
    const double elapsed = p.seconds - first_->seconds;
    if (done > 0 && elapsed > 0 && p.disk_total >= p.disk_bytes)
      line += fmt::format(
          ", {} left",
          human_duration(elapsed * static_cast<double>(p.disk_total - p.disk_bytes) / done));
    if (terminal_) {
      std::fprintf(stderr, "\r%s\033[K", line.c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  ~ProgressReport() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  bool terminal_;
  double interval_;
  double last_ = 0;
  std::optional<data::PrepProgress> first_;
  bool drawn_ = false;
};

std::string describe_paths(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return paths.front();
  return fmt::format("{} shards, {} ... {}", paths.size(), paths.front(), paths.back());
}

struct PrepCliOptions {
  data::PrepOptions prep;
  std::string invalid_utf8 = "error";
  bool quiet = false;
  double progress_every = 5;
};

}  // namespace

Run add_prep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "prep",
      "Tokenize a corpus with GPT-2's byte-level BPE into HDF5 token datasets\n"
      "(<output>/train.h5 and val.h5, or shards train-00000.h5 ... with --shard-tokens).\n"
      "Text files: each file is one document, and a literal <|endoftext|> in a file also ends\n"
      "a document. JSON lines (--jsonl-key KEY): each line is a document, the string under KEY.\n"
      "Every document starts with the end-of-text token. Files may be plain, gzip or zstd\n"
      "(recognised by content). The output is the same at any --threads.");
  auto o = std::make_shared<PrepCliOptions>();
  data::PrepOptions& p = o->prep;
  p.threads = available_cores();
  cmd->add_option("--tokenizer", p.tokenizer_dir,
                  "Directory with GPT-2's encoder.json and vocab.bpe (e.g. inputs/gpt2-tokenizer)")
      ->required();
  cmd->add_option("--output", p.output_dir,
                  "Directory to write the token datasets into (created if missing); a run "
                  "without --resume replaces the shards and prep-state.json of an earlier one")
      ->required();
  cmd->add_option("files", p.inputs,
                  "Input files in corpus order: UTF-8 text, or JSON lines with --jsonl-key "
                  "(plain, .gz or .zst)")
      ->required();
  cmd->add_option("--jsonl-key", p.jsonl_key,
                  "Read the inputs as JSON lines (.jsonl, .jsonl.gz, .jsonl.zst): one JSON object "
                  "per line, its string under this key one document (e.g. --jsonl-key text); "
                  "blank lines are ignored. A literal <|endoftext|> in a document is text");
  cmd->add_flag("--skip-bad-lines", p.skip_bad_lines,
                "JSON lines: skip a line that is not a JSON object with a string under the key, "
                "and count it, instead of stopping with its file and line number");
  cmd->add_option("--threads", p.threads,
                  "Threads that tokenize (default: the CPUs available to this process); the "
                  "reading and writing thread comes on top")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", p.shard_tokens,
                  "Write shards of at most this many tokens, train-00000.h5, train-00001.h5, ... "
                  "and val-00000.h5, ..., plus prep-state.json for --resume (0: one train.h5 "
                  "and one val.h5). Train on them with --set 'data.train=DIR/train-*.h5'")
      ->capture_default_str();
  cmd->add_flag("--resume", p.resume,
                "Continue an interrupted sharded run in --output: keep its complete shards and "
                "redo the rest, from the first incomplete shard (same inputs and options)");
  cmd->add_option("--val-fraction", p.val_fraction,
                  "Fraction of the tokens that go to the validation split, taken as the end of "
                  "every split block; 0 writes the training split only")
      ->capture_default_str();
  cmd->add_option("--split-block", p.split_block,
                  "Tokens per split block: the last val-fraction of each block is validation "
                  "data, so validation text is spread over the whole corpus")
      ->capture_default_str();
  cmd->add_option("--invalid-utf8", o->invalid_utf8,
                  "What to do with bytes that are not valid UTF-8: 'error' stops and names the "
                  "file, line and byte offset; 'replace' substitutes U+FFFD for each invalid "
                  "sequence (as Python's errors=\"replace\")")
      ->check(CLI::IsMember({"error", "replace"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No progress lines (errors and the final summary remain)");
  cmd->add_option("--progress-every", o->progress_every,
                  "Seconds between progress lines on stderr when it is not a terminal (a job "
                  "log); on a terminal one line is redrawn in place")
      ->capture_default_str();

  return [o]() -> int {
    // A file whose writing failed (a full disk) cannot be closed, and HDF5's exit handler, which
    // closes what is still open, crashes on it: this process leaves its files to the OS instead
    // (the ones it completed were closed and renamed already; a failed one is removed).
    H5dont_atexit();
    data::PrepOptions& prep = o->prep;
    CHIMERA_REQUIRE(o->progress_every > 0, "--progress-every {} must be positive (seconds)",
                    o->progress_every);
    prep.invalid_utf8 =
        o->invalid_utf8 == "replace" ? data::InvalidUtf8::Replace : data::InvalidUtf8::Error;
    std::shared_ptr<ProgressReport> report;
    if (!o->quiet) {
      report = std::make_shared<ProgressReport>(o->progress_every);
      prep.on_progress = [report](const data::PrepProgress& progress) { report->update(progress); };
    }
    const data::PrepResult result = data::prepare_dataset(prep);
    prep.on_progress = nullptr;
    report.reset();
    if (result.already_finished) {
      log::info(
          "prep: {} already holds the complete output of this prep ({} documents, {} "
          "train tokens in {}); nothing to do",
          prep.output_dir, result.documents, result.train_tokens,
          describe_paths(result.train_paths));
      return 0;
    }
    const double mb = static_cast<double>(result.text_bytes) / 1e6;
    log::info(
        "prep: {} documents{}, {:.2f} MB of input{} -> {} train tokens ({}){} in {:.2f} s "
        "({:.1f} MB/s, {} threads)",
        result.documents,
        result.bad_lines > 0 ? fmt::format(" ({} bad lines skipped)", result.bad_lines) : "", mb,
        result.resumed ? " (resumed)" : "", result.train_tokens, describe_paths(result.train_paths),
        result.val_paths.empty() ? std::string()
                                 : fmt::format(", {} val tokens ({})", result.val_tokens,
                                               describe_paths(result.val_paths)),
        result.seconds, mb / std::max(result.seconds, 1e-9), prep.threads);
    if (!result.first_bad_line.empty())
      log::warn("prep: the first bad line skipped: {}", result.first_bad_line);
    return 0;
  };
}

}  // namespace chimera::cli
