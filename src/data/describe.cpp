#include "chimera/data/describe.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/data/prep_state.hpp"
#include "chimera/data/shard_writer.hpp"
#include "chimera/data/tokenizer.hpp"

namespace chimera::data {

namespace {

std::optional<Tokenizer> try_tokenizer(const TokenDataset& ds, const std::string& dir,
                                       std::string& why_not) {
  if (ds.tokenizer() != "gpt2") {
    why_not = ds.tokenizer() ? fmt::format("tokenizer '{}' is not GPT-2's", *ds.tokenizer())
                             : "the file names no tokenizer";
    return std::nullopt;
  }
  if (dir.empty()) {
    why_not = "pass --tokenizer DIR to decode";
    return std::nullopt;
  }
  try {
    return Tokenizer::load(dir);
  } catch (const InputError& e) {
    why_not = fmt::format("cannot load the tokenizer: {}", e.what());
    return std::nullopt;
  }
}

// Control characters shown as escapes so that a snippet stays on a few lines.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out;
}

std::string samples_line(const TokenDataset& ds, int seq_len) {
  std::string out = "  samples    ";
  if (seq_len > 0) {
    out += fmt::format(" T={}: {}", seq_len, ds.num_samples(seq_len));
  } else {
    for (const int T : {64, 128, 256, 512, 1024})
      out += fmt::format(" T={}: {}", T, ds.num_samples(T));
  }
  return out + "\n";
}

}  // namespace

std::string describe_dataset(const std::string& path, const DatasetDescribeOptions& options) {
  const TokenDataset ds = TokenDataset::open({path});
  const DatasetShard& shard = ds.shards().front();
  std::ostringstream out;
  out << fmt::format(
      "{}: token dataset\n  tokens      {} ({}{})\n", path, ds.num_tokens(), shard.dtype,
      shard.chunk_tokens > 0 ? fmt::format(", chunks of {}", shard.chunk_tokens) : ", not chunked");
  const auto shown = [](const auto& value) {
    return value ? fmt::format("{}", *value) : std::string("absent");
  };
  out << fmt::format("  vocabulary  vocab_size {}, eos_token {}, tokenizer {}\n",
                     shown(ds.vocab_size()), shown(ds.eos_token()), shown(ds.tokenizer()));
  // What `chimera train` checks: every token read below the model's vocab_size.
  const TokenAt max = ds.max_token(0);
  if (max.offset >= 0) {
    const bool beyond = ds.vocab_size() && max.token >= *ds.vocab_size();
    out << fmt::format(
        "  token ids   max {} (first at offset {}){}: trains with model.vocab_size "
        ">= {}\n",
        max.token, max.offset,
        beyond ? fmt::format(", at or above the file's vocab_size {}", *ds.vocab_size()) : "",
        max.token + 1);
  }
  out << samples_line(ds, options.seq_len);
  const std::int64_t offset = std::clamp<std::int64_t>(options.offset, 0, ds.num_tokens());
  const std::int64_t count = std::clamp<std::int64_t>(options.tokens, 0, ds.num_tokens() - offset);
  std::vector<std::int32_t> snippet(static_cast<std::size_t>(count));
  ds.read_tokens(0, offset, snippet);
  out << fmt::format("  tokens [{}, {}): [{}]\n", offset, offset + count, fmt::join(snippet, ", "));
  std::string why_not;
  if (const auto tokenizer = try_tokenizer(ds, options.tokenizer_dir, why_not)) {
    out << "  decoded: \"" << escaped(tokenizer->decode(snippet)) << "\"\n";
  } else {
    out << "  (not decoded: " << why_not << ")\n";
  }
  return out.str();
}

std::string describe_dataset_directory(const std::string& dir,
                                       const DatasetDescribeOptions& options) {
  namespace fs = std::filesystem;
  // split -> (number or -1 for the unsharded file, path), in name order.
  std::map<std::string, std::map<long, std::string>> splits;
  std::vector<std::string> partial;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (const auto shard = parse_shard_name(name))
      splits[shard->stem][shard->number] = entry.path().string();
    else if (name.ends_with(".h5.tmp"))
      partial.push_back(name);
  }
  CHIMERA_REQUIRE(!ec, "{}: cannot list the directory: {}", dir, ec.message());
  CHIMERA_REQUIRE(!splits.empty(),
                  "{}: holds no token datasets (train.h5 and val.h5, or shards train-00000.h5, "
                  "... from `chimera prep`)",
                  dir);
  std::ostringstream out;
  out << fmt::format("{}: token dataset directory\n", dir);
  std::string vocabulary;  // of the first split (prep's splits share one tokenizer)
  const auto shown = [](const auto& value) {
    return value ? fmt::format("{}", *value) : std::string("absent");
  };
  for (const std::string split : {"train", "val"}) {
    if (!splits.contains(split)) continue;
    const auto& files = splits.at(split);
    std::vector<std::string> paths;
    std::vector<long> missing;
    long expected = 0;
    for (const auto& [number, path] : files) {
      if (number >= 0)
        for (; expected < number; ++expected) missing.push_back(expected);
      expected = number + 1;
      paths.push_back(path);
    }
    const TokenDataset ds = TokenDataset::open(paths);
    std::int64_t smallest = INT64_MAX, largest = 0;
    for (const auto& shard : ds.shards()) {
      smallest = std::min(smallest, shard.tokens);
      largest = std::max(largest, shard.tokens);
    }
    const auto name = [](const std::string& path) { return fs::path(path).filename().string(); };
    out << fmt::format("  {:<5}      {} tokens in {} file{} ({}{}), {}", split, ds.num_tokens(),
                       paths.size(), paths.size() == 1 ? "" : "s", name(paths.front()),
                       paths.size() > 1 ? " ... " + name(paths.back()) : "",
                       ds.shards().front().dtype);
    if (paths.size() > 1) out << fmt::format(", {} to {} tokens per shard", smallest, largest);
    out << "\n";
    if (!missing.empty())
      out << fmt::format("  MISSING    {} shard{} numbered {}\n", missing.size(),
                         missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
    out << samples_line(ds, options.seq_len);
    if (vocabulary.empty())
      vocabulary =
          fmt::format("  vocabulary  vocab_size {}, eos_token {}, tokenizer {}\n",
                      shown(ds.vocab_size()), shown(ds.eos_token()), shown(ds.tokenizer()));
  }
  out << vocabulary;
  if (const auto state = read_prep_state(dir)) {
    if (state->finished)
      out << fmt::format("  prep       complete ({} documents)\n", state->resume.documents);
    else
      out << fmt::format(
          "  prep       INTERRUPTED: {} train and {} val shards complete; rerun the same "
          "`chimera prep` with --resume to finish\n",
          state->train_shards, state->val_shards);
  }
  for (const std::string& name : partial)
    out << fmt::format("  partial    {} (an unfinished shard, not part of the dataset)\n", name);
  return out.str();
}

std::string decode_dataset(const std::string& path, const std::string& tokenizer_dir) {
  const TokenDataset ds = TokenDataset::open({path});
  std::string why_not;
  const auto tokenizer = try_tokenizer(ds, tokenizer_dir, why_not);
  CHIMERA_REQUIRE(tokenizer.has_value(), "{}: cannot decode: {}", path, why_not);
  std::string text;
  constexpr std::int64_t kBlock = std::int64_t{1} << 20;
  std::vector<std::int32_t> tokens;
  for (std::int64_t at = 0; at < ds.num_tokens(); at += kBlock) {
    tokens.resize(static_cast<std::size_t>(std::min(kBlock, ds.num_tokens() - at)));
    ds.read_tokens(0, at, tokens);
    text += tokenizer->decode(tokens);
  }
  return text;
}

}  // namespace chimera::data
