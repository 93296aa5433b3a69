#include "chimera/data/shard_writer.hpp"

#include <algorithm>
#include <filesystem>

#include "chimera/core/error.hpp"

namespace chimera::data {

std::string shard_path(const std::string& dir, const std::string& stem, int index) {
  return (std::filesystem::path(dir) / fmt::format("{}-{:05d}.h5", stem, index)).string();
}

std::optional<ShardName> parse_shard_name(std::string_view filename) {
  if (!filename.ends_with(".h5")) return std::nullopt;
  std::string_view base = filename.substr(0, filename.size() - 3);
  for (const std::string_view stem : {"train", "val"}) {
    if (!base.starts_with(stem)) continue;
    const std::string_view rest = base.substr(stem.size());
    if (rest.empty()) return ShardName{std::string(stem), -1};
    const std::string_view digits = rest.substr(1);
    if (rest.front() != '-' || digits.size() < 5 || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return ShardName{std::string(stem), std::stol(std::string(digits))};
  }
  return std::nullopt;
}

ShardWriter::ShardWriter(std::string dir, std::string stem, std::int64_t shard_tokens,
                         DatasetLabels labels, int complete_shards, std::int64_t routed)
    : dir_(std::move(dir)),
      stem_(std::move(stem)),
      shard_tokens_(shard_tokens),
      labels_(std::move(labels)),
      complete_(complete_shards),
      routed_(routed),
      skip_until_(std::int64_t{complete_shards} * shard_tokens) {
  CHIMERA_CHECK(shard_tokens >= 0 && complete_shards >= 0 && routed >= 0 &&
                    (shard_tokens > 0 || complete_shards == 0),
                "shards of {} tokens, {} complete, {} routed", shard_tokens, complete_shards,
                routed);
  CHIMERA_CHECK(routed <= skip_until_ || shard_tokens == 0,
                "resuming {} after {} tokens, beyond the {} complete shards", stem_, routed,
                complete_shards);
  open_next();
}

void ShardWriter::open_next() {
  const std::string path = shard_tokens_ > 0
                               ? shard_path(dir_, stem_, complete_)
                               : (std::filesystem::path(dir_) / (stem_ + ".h5")).string();
  open_.emplace(path, labels_.vocab_size, labels_.eos_token, labels_.tokenizer);
}

void ShardWriter::append(std::span<const std::int32_t> tokens) {
  if (routed_ < skip_until_) {
    const auto drop = static_cast<std::size_t>(
        std::min<std::int64_t>(skip_until_ - routed_, static_cast<std::int64_t>(tokens.size())));
    routed_ += static_cast<std::int64_t>(drop);
    tokens = tokens.subspan(drop);
  }
  while (!tokens.empty()) {
    if (!open_) open_next();
    std::size_t take = tokens.size();
    if (shard_tokens_ > 0)
      take = static_cast<std::size_t>(
          std::min<std::int64_t>(shard_tokens_ - open_->size(), static_cast<std::int64_t>(take)));
    open_->append(tokens.first(take));
    routed_ += static_cast<std::int64_t>(take);
    tokens = tokens.subspan(take);
    if (shard_tokens_ > 0 && open_->size() == shard_tokens_) {
      open_->finish();
      open_.reset();
      ++complete_;
    }
  }
}

void ShardWriter::finish() {
  if (!open_) return;
  // An empty shard after complete ones is not written (its temporary file is removed).
  if (open_->size() == 0 && complete_ > 0) {
    open_.reset();
    return;
  }
  open_->finish();
  open_.reset();
  ++complete_;
}

std::vector<std::string> ShardWriter::paths() const {
  if (shard_tokens_ == 0) return {(std::filesystem::path(dir_) / (stem_ + ".h5")).string()};
  std::vector<std::string> out;
  for (int i = 0; i < complete_; ++i) out.push_back(shard_path(dir_, stem_, i));
  return out;
}

}  // namespace chimera::data
