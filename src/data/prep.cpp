#include "chimera/data/prep.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/data/ordered_pool.hpp"
#include "chimera/data/piece_encoder.hpp"
#include "chimera/data/prep_state.hpp"
#include "chimera/data/shard_writer.hpp"
#include "chimera/data/tokenizer.hpp"

namespace chimera::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTokenizerName = "gpt2";

// Routes the token stream into the train and validation writers (see prep.hpp), a run of
// consecutive tokens of one split at a time.
class SplitRouter {
 public:
  SplitRouter(ShardWriter& train, ShardWriter* val, double val_fraction, std::int64_t block,
              std::int32_t eos)
      : train_(train), val_(val), block_(block), eos_(eos) {
    const auto val_tokens =
        static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(block)));
    train_per_block_ = val_ != nullptr ? block - val_tokens : block;
    CHIMERA_REQUIRE(val_ == nullptr || (val_tokens >= 1 && train_per_block_ >= 1),
                    "--val-fraction {} of a split block of {} tokens leaves {} validation and {} "
                    "training tokens per block; both must be at least 1",
                    val_fraction, block, val_tokens, train_per_block_);
  }

  void restore(const PrepCheckpoint& c) {
    position_ = c.position;
    train_last_ = c.train_last;
    val_last_ = c.val_last;
  }
  void save(PrepCheckpoint& c) const {
    c.position = position_;
    c.train_last = train_last_;
    c.val_last = val_last_;
  }

  void push(std::span<const std::int32_t> tokens) {
    while (!tokens.empty()) {
      const std::int64_t in_block = position_ % block_;
      const bool to_val = val_ != nullptr && in_block >= train_per_block_;
      const std::int64_t run_end = to_val || val_ == nullptr ? block_ : train_per_block_;
      const auto take = static_cast<std::size_t>(
          std::min<std::int64_t>(run_end - in_block, static_cast<std::int64_t>(tokens.size())));
      std::int64_t& last = to_val ? val_last_ : train_last_;
      ShardWriter& writer = to_val ? *val_ : train_;
      if (last >= 0 && last != position_ - 1 && tokens.front() != eos_) {
        const std::int32_t mark = eos_;
        writer.append({&mark, 1});
      }
      writer.append(tokens.first(take));
      position_ += static_cast<std::int64_t>(take);
      last = position_ - 1;
      tokens = tokens.subspan(take);
    }
  }

 private:
  ShardWriter& train_;
  ShardWriter* val_;
  std::int64_t block_;
  std::int64_t train_per_block_ = 0;
  std::int32_t eos_;
  std::int64_t position_ = 0;
  std::int64_t train_last_ = -1, val_last_ = -1;
};

// What shapes the output: a resume must see the same.
std::string settings_json(const PrepOptions& o, const std::vector<std::uint64_t>& sizes,
                          const Tokenizer& tokenizer) {
  const nlohmann::json j = {
      {"inputs", o.inputs},
      {"input_bytes", sizes},
      {"jsonl_key", o.jsonl_key},
      {"skip_bad_lines", o.skip_bad_lines},
      {"val_fraction", o.val_fraction},
      {"split_block", o.split_block},
      {"invalid_utf8", o.invalid_utf8 == InvalidUtf8::Replace ? "replace" : "error"},
      {"shard_tokens", o.shard_tokens},
      {"vocab_size", tokenizer.vocab_size()},
      {"eos_token", tokenizer.eos_token()}};
  return j.dump();
}

// "--resume: val_fraction is 0.1 now but was 0.05 ...": the first setting that differs.
std::string settings_difference(const std::string& now, const std::string& before) {
  const auto a = nlohmann::json::parse(now), b = nlohmann::json::parse(before);
  for (const auto& [key, value] : a.items()) {
    const std::string was = b.contains(key) ? b.at(key).dump() : "absent";
    if (!b.contains(key) || b.at(key) != value)
      return fmt::format("{} is {} now but was {}", key, value.dump(), was);
  }
  return "the settings differ";
}

// Shards and state of an earlier prep in `dir`, which a fresh run replaces: left in place,
// a glob over the new shards would also pick up stale ones.
int remove_earlier_shards(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp")) name.resize(name.size() - 4);
    const auto shard = parse_shard_name(name);
    if ((shard && shard->number >= 0) || name == kPrepStateFile) {
      fs::remove(entry.path(), ec);
      ++removed;
    }
  }
  return removed;
}

// "x.jsonl", "x.json.gz", "x.jsonl.zst", ...: a name that promises JSON.
bool json_file_name(std::string_view name) {
  for (const std::string_view suffix : {".gz", ".zst"})
    if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
  return name.ends_with(".jsonl") || name.ends_with(".json");
}

// Complete shards named by a state must be on disk with exactly `shard_tokens` tokens (the last
// one of a finished run: at most that many).
void check_complete_shards(const std::string& dir, const std::string& stem, int count,
                           std::int64_t shard_tokens, bool finished) {
  for (int i = 0; i < count; ++i) {
    const std::string path = shard_path(dir, stem, i);
    std::int64_t tokens = -1;
    try {
      tokens = TokenDataset::open({path}).num_tokens();
    } catch (const InputError& e) {
      throw InputError(
          fmt::format("--resume: {} (a complete shard of the interrupted run); "
                      "rerun without --resume to start over",
                      e.what()));
    }
    const bool last = finished && i == count - 1;
    CHIMERA_REQUIRE(tokens == shard_tokens || (last && tokens < shard_tokens),
                    "--resume: {} holds {} tokens, but a complete shard holds {}; rerun without "
                    "--resume to start over",
                    path, tokens, shard_tokens);
  }
}

// Validation shards are smaller than training shards by the split's ratio, so that shard i of
// both splits covers about the same stretch of the corpus and both complete shards at the same
// pace: a resume, which restarts before the oldest incomplete shard of either split, then redoes
// about one shard's worth of input, not the many training shards one validation shard spans.
std::int64_t validation_shard_tokens(std::int64_t shard_tokens, double val_fraction,
                                     std::int64_t block) {
  if (shard_tokens == 0 || val_fraction == 0) return shard_tokens;
  const auto val =
      static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(block)));
  const std::int64_t train = block - val;
  if (val < 1 || train < 1) return shard_tokens;  // refused by the router
  // ceil(shard_tokens * val / train), without overflow for any shard size.
  const auto ratio = static_cast<long double>(val) / static_cast<long double>(train);
  return std::clamp<std::int64_t>(
      static_cast<std::int64_t>(std::ceil(static_cast<long double>(shard_tokens) * ratio)), 1,
      shard_tokens);
}

struct Encoded {
  CorpusPiece piece;  // its text is dropped once encoded
  std::uint64_t text_bytes = 0;
  EncodedPiece result;
};

}  // namespace

PrepResult prepare_dataset(const PrepOptions& options) {
  CHIMERA_REQUIRE(!options.inputs.empty(), "no input files given");
  CHIMERA_REQUIRE(options.val_fraction >= 0 && options.val_fraction < 1,
                  "--val-fraction {} must be in [0, 1)", options.val_fraction);
  CHIMERA_CHECK(options.piece_bytes > 0, "piece of {} bytes", options.piece_bytes);
  CHIMERA_REQUIRE(options.split_block >= 2, "--split-block {} must be at least 2 tokens",
                  options.split_block);
  CHIMERA_REQUIRE(options.threads >= 1, "--threads {} must be at least 1", options.threads);
  CHIMERA_REQUIRE(options.shard_tokens >= 0, "--shard-tokens {} must be positive (or 0: no shards)",
                  options.shard_tokens);
  CHIMERA_REQUIRE(!options.resume || options.shard_tokens > 0,
                  "--resume needs --shard-tokens: only sharded output can be resumed");
  CHIMERA_REQUIRE(!options.skip_bad_lines || !options.jsonl_key.empty(),
                  "--skip-bad-lines applies to JSON lines: pass --jsonl-key KEY too");
  std::uint64_t total_disk_bytes = 0;
  std::vector<std::uint64_t> sizes;
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    CHIMERA_REQUIRE(fs::is_regular_file(input, ec), "{}: no such input file", input);
    CHIMERA_REQUIRE(!options.jsonl_key.empty() || !json_file_name(input),
                    "{}: looks like JSON lines: pass --jsonl-key KEY (e.g. --jsonl-key text) to "
                    "read the documents under KEY, rather than tokenizing the JSON as text",
                    input);
    sizes.push_back(fs::file_size(input, ec));
    total_disk_bytes += sizes.back();
  }
  const Tokenizer tokenizer = Tokenizer::load(options.tokenizer_dir);
  const std::string& dir = options.output_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  CHIMERA_REQUIRE(!ec, "{}: cannot create the output directory: {}", dir, ec.message());

  const bool sharded = options.shard_tokens > 0;
  const std::int64_t val_shard_tokens =
      validation_shard_tokens(options.shard_tokens, options.val_fraction, options.split_block);
  PrepState state;
  state.settings = settings_json(options, sizes, tokenizer);
  PrepResult result;
  if (options.resume) {
    const auto earlier = read_prep_state(dir);
    CHIMERA_REQUIRE(earlier.has_value(),
                    "--resume: {} has no {} (no sharded prep ran there); run without --resume", dir,
                    kPrepStateFile);
    CHIMERA_REQUIRE(earlier->settings == state.settings,
                    "--resume: {} (from {}/{}); rerun with the same inputs and options, or "
                    "without --resume to start over",
                    settings_difference(state.settings, earlier->settings), dir, kPrepStateFile);
    state = *earlier;
    check_complete_shards(dir, "train", state.train_shards, options.shard_tokens,
                          earlier->finished);
    check_complete_shards(dir, "val", state.val_shards, val_shard_tokens, earlier->finished);
    result.resumed = true;
    if (state.finished) {
      for (int i = 0; i < state.train_shards; ++i)
        result.train_paths.push_back(shard_path(dir, "train", i));
      for (int i = 0; i < state.val_shards; ++i)
        result.val_paths.push_back(shard_path(dir, "val", i));
      result.train_tokens = state.resume.train_routed;
      result.val_tokens = state.resume.val_routed;
      result.documents = state.resume.documents;
      result.bad_lines = state.resume.bad_lines;
      result.already_finished = true;
      return result;
    }
  } else {
    remove_earlier_shards(dir);
  }
  PrepCheckpoint at = state.resume;  // the stream's state at the next piece start

  const DatasetLabels labels{tokenizer.vocab_size(), tokenizer.eos_token(), kTokenizerName};
  ShardWriter train(dir, "train", options.shard_tokens, labels, state.train_shards,
                    at.train_routed);
  std::optional<ShardWriter> val;
  if (options.val_fraction > 0)
    val.emplace(dir, "val", val_shard_tokens, labels, state.val_shards, at.val_routed);
  SplitRouter router(train, val ? &*val : nullptr, options.val_fraction, options.split_block,
                     tokenizer.eos_token());
  router.restore(at);
  if (sharded) write_prep_state(dir, state);

  // Where a resume may start for each split: a piece start before its open shard's first token.
  PrepCheckpoint train_resume = at, val_resume = at;
  const PieceEncoding encoding{
      options.jsonl_key.empty() ? InputFormat::Text : InputFormat::JsonLines, options.jsonl_key,
      options.invalid_utf8, options.skip_bad_lines};
  CorpusReader reader(options.inputs, encoding.format, options.piece_bytes, at.input);
  const auto make_work = [&]() -> OrderedPool<CorpusPiece, Encoded>::Work {
    // One tokenizer per thread (its word cache is not shared); the calling thread's for one.
    auto own = options.threads > 1 ? std::make_shared<Tokenizer>(tokenizer.clone()) : nullptr;
    const Tokenizer* use = own ? own.get() : &tokenizer;
    return [own, use, &options, &encoding](CorpusPiece& piece) {
      Encoded e;
      e.result = encode_piece(*use, piece, options.inputs[piece.start.file], encoding);
      e.text_bytes = piece.text.size();
      piece.text = std::string();
      e.piece = std::move(piece);
      return e;
    };
  };
  OrderedPool<CorpusPiece, Encoded> pool(options.threads, make_work);
  const std::size_t window = 2 * static_cast<std::size_t>(options.threads) + 2;

  const Stopwatch clock;
  std::size_t current_file = at.input.file;
  std::int64_t file_documents = 0;
  bool file_from_start = at.input.offset == 0;
  const auto check_file_had_documents = [&] {
    CHIMERA_REQUIRE(!file_from_start || file_documents > 0 || current_file >= options.inputs.size(),
                    "{}: holds no documents (every line is blank{})", options.inputs[current_file],
                    options.skip_bad_lines ? " or skipped as bad" : "");
  };
  bool more = true;
  // A reading error (an empty or unreadable file) waits until the pieces before it are done, so
  // that the error reported is the first in corpus order, whatever the read-ahead.
  std::exception_ptr read_error;
  while (true) {
    while (more && pool.in_flight() < window) {
      CorpusPiece piece;
      try {
        more = reader.next(piece);
      } catch (const InputError&) {
        read_error = std::current_exception();
        more = false;
      }
      if (more) pool.submit(std::move(piece));
    }
    if (pool.in_flight() == 0) break;
    const Encoded e = pool.take();
    if (e.piece.start.file != current_file) {
      check_file_had_documents();
      current_file = e.piece.start.file;
      file_documents = 0;
      file_from_start = e.piece.start.offset == 0;
    }
    at.input = e.piece.start;
    const PrepCheckpoint piece_start = at;
    const int train_done = train.complete_shards(), val_done = val ? val->complete_shards() : 0;
    router.push(e.result.tokens);
    router.save(at);
    at.train_routed = train.routed();
    at.val_routed = val ? val->routed() : 0;
    at.documents += e.result.documents;
    file_documents += e.result.documents;
    at.bad_lines += e.result.bad_lines;
    if (result.first_bad_line.empty()) result.first_bad_line = e.result.first_bad_line;
    at.text_bytes += e.text_bytes;
    result.text_bytes += e.text_bytes;
    if (sharded) {
      if (train.complete_shards() != train_done) train_resume = piece_start;
      if (val && val->complete_shards() != val_done) val_resume = piece_start;
      if (train.complete_shards() != train_done || (val && val->complete_shards() != val_done)) {
        state.train_shards = train.complete_shards();
        state.val_shards = val ? val->complete_shards() : 0;
        state.resume =
            val && val_resume.position < train_resume.position ? val_resume : train_resume;
        write_prep_state(dir, state);
      }
    }
    if (options.on_progress)
      options.on_progress({result.text_bytes, e.piece.disk_done, total_disk_bytes, at.documents,
                           train.routed() + (val ? val->routed() : 0), clock.seconds()});
  }
  if (read_error) std::rethrow_exception(read_error);
  check_file_had_documents();
  CHIMERA_REQUIRE(at.documents > 0, "the corpus ({}{}) holds no documents", options.inputs.front(),
                  options.inputs.size() > 1
                      ? fmt::format(" and {} more files", options.inputs.size() - 1)
                      : "");
  train.finish();
  if (val) val->finish();
  result.train_paths = train.paths();
  if (val) result.val_paths = val->paths();
  result.train_tokens = train.routed();
  result.val_tokens = val ? val->routed() : 0;
  result.documents = at.documents;
  result.bad_lines = at.bad_lines;
  result.seconds = clock.seconds();
  if (sharded) {
    state.finished = true;
    state.train_shards = train.complete_shards();
    state.val_shards = val ? val->complete_shards() : 0;
    state.resume = at;
    write_prep_state(dir, state);
  }
  return result;
}

}  // namespace chimera::data
