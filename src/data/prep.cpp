#include "chimera/data/prep.hpp"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/data/dataset_writer.hpp"
#include "chimera/data/tokenizer.hpp"

namespace chimera::data {

namespace {

constexpr const char* kTokenizerName = "gpt2";

// A text file, plain or gzip-compressed (zlib reads plain files unchanged).
class TextFile {
 public:
  explicit TextFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    CHIMERA_REQUIRE(file_ != nullptr, "{}: cannot open the text file", path);
    gzbuffer(file_, 1 << 20);
  }
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  ~TextFile() { gzclose(file_); }

  // Appends up to `count` bytes to `out`; returns false at the end of the file.
  bool read(std::string& out, std::size_t count) {
    const std::size_t old = out.size();
    out.resize(old + count);
    const int got = gzread(file_, out.data() + old, static_cast<unsigned>(count));
    int status = Z_OK;
    const char* message = gzerror(file_, &status);
    CHIMERA_REQUIRE(got >= 0 && status == Z_OK, "{}: cannot be read: {}", path_,
                    message != nullptr ? message : "read error");
    out.resize(old + static_cast<std::size_t>(got));
    return static_cast<std::size_t>(got) == count;
  }
  // Position in the file on disk (compressed bytes for .gz): for progress.
  std::uint64_t disk_offset() const { return static_cast<std::uint64_t>(gzoffset(file_)); }

 private:
  std::string path_;
  gzFile file_;
};

// Routes the token stream into the train and validation writers (see prep.hpp).
class SplitRouter {
 public:
  SplitRouter(TokenDatasetWriter& train, TokenDatasetWriter* val, double val_fraction,
              std::int64_t block, std::int32_t eos)
      : train_(train), val_(val), block_(block), eos_(eos) {
    const auto val_tokens =
        static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(block)));
    train_per_block_ = val_ != nullptr ? block - val_tokens : block;
    CHIMERA_REQUIRE(val_ == nullptr || (val_tokens >= 1 && train_per_block_ >= 1),
                    "--val-fraction {} of a split block of {} tokens leaves {} validation and {} "
                    "training tokens per block; both must be at least 1",
                    val_fraction, block, val_tokens, train_per_block_);
  }

  void push(std::span<const std::int32_t> tokens) {
    for (const std::int32_t token : tokens) {
      const bool to_val = val_ != nullptr && position_ % block_ >= train_per_block_;
      Split& split = to_val ? val_split_ : train_split_;
      TokenDatasetWriter& writer = to_val ? *val_ : train_;
      if (split.last_position >= 0 && split.last_position != position_ - 1 && token != eos_) {
        const std::int32_t mark = eos_;
        writer.append({&mark, 1});
      }
      writer.append({&token, 1});
      split.last_position = position_++;
    }
  }

 private:
  struct Split {
    std::int64_t last_position = -1;
  };
  TokenDatasetWriter& train_;
  TokenDatasetWriter* val_;
  std::int64_t block_;
  std::int64_t train_per_block_ = 0;
  std::int32_t eos_;
  std::int64_t position_ = 0;
  Split train_split_, val_split_;
};

}  // namespace

std::string read_text_file(const std::string& path) {
  TextFile file(path);
  std::string text;
  while (file.read(text, std::size_t{1} << 20)) {
  }
  return text;
}

PrepResult prepare_dataset(const PrepOptions& options) {
  CHIMERA_REQUIRE(!options.inputs.empty(), "no input text files given");
  CHIMERA_REQUIRE(options.val_fraction >= 0 && options.val_fraction < 1,
                  "--val-fraction {} must be in [0, 1)", options.val_fraction);
  CHIMERA_CHECK(options.piece_bytes > 0, "piece of {} bytes", options.piece_bytes);
  CHIMERA_REQUIRE(options.split_block >= 2, "--split-block {} must be at least 2 tokens",
                  options.split_block);
  std::uint64_t total_disk_bytes = 0;
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    CHIMERA_REQUIRE(std::filesystem::is_regular_file(input, ec), "{}: no such text file", input);
    total_disk_bytes += std::filesystem::file_size(input, ec);
  }
  const Tokenizer tokenizer = Tokenizer::load(options.tokenizer_dir);

  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  CHIMERA_REQUIRE(!ec, "{}: cannot create the output directory: {}", options.output_dir,
                  ec.message());

  PrepResult result;
  result.train_path = (std::filesystem::path(options.output_dir) / "train.h5").string();
  TokenDatasetWriter train(result.train_path, tokenizer.vocab_size(), tokenizer.eos_token(),
                           kTokenizerName);
  std::optional<TokenDatasetWriter> val;
  if (options.val_fraction > 0) {
    result.val_path = (std::filesystem::path(options.output_dir) / "val.h5").string();
    val.emplace(result.val_path, tokenizer.vocab_size(), tokenizer.eos_token(), kTokenizerName);
  }
  SplitRouter router(train, val ? &*val : nullptr, options.val_fraction, options.split_block,
                     tokenizer.eos_token());

  const Stopwatch clock;
  std::uint64_t disk_done = 0;
  std::vector<std::int32_t> tokens;
  std::string text, replaced;
  for (const std::string& input : options.inputs) {
    TextFile file(input);
    const std::int32_t eos = tokenizer.eos_token();
    router.push({&eos, 1});
    ++result.documents;
    std::uint64_t offset = 0;  // of text[0] in the (uncompressed) file
    text.clear();
    bool more = true;
    while (more) {
      more = file.read(text, options.piece_bytes);
      const std::size_t cut = more ? safe_split_point(text, text.size()) : text.size();
      if (cut == 0 && more) continue;  // no safe cut yet: read on
      std::string_view piece(text.data(), cut);
      if (options.invalid_utf8 == InvalidUtf8::Replace) {
        replaced = replace_invalid_utf8(piece);
        piece = replaced;
      }
      tokens.clear();
      try {
        tokenizer.encode(piece, tokens, offset);
      } catch (const InputError& e) {
        throw InputError(
            fmt::format("{}: {} (pass --invalid-utf8 replace to replace invalid "
                        "bytes by U+FFFD)",
                        input, e.what()));
      }
      for (const std::int32_t token : tokens) result.documents += token == eos ? 1 : 0;
      router.push(tokens);
      result.text_bytes += cut;
      offset += cut;
      text.erase(0, cut);
      if (options.on_progress)
        options.on_progress({result.text_bytes, disk_done + file.disk_offset(), total_disk_bytes});
    }
    disk_done += std::filesystem::file_size(input, ec);
  }
  result.train_tokens = train.size();
  train.finish();
  if (val) {
    result.val_tokens = val->size();
    val->finish();
  }
  result.seconds = clock.seconds();
  return result;
}

}  // namespace chimera::data
