#pragma once
// What a sharded `chimera prep` records in <output>/prep-state.json so that `--resume` can pick
// up after a failure: the settings that shape the output (a resume with other settings would mix
// two outputs), how many shards of each split are complete, and a point of the input from which
// the rest is produced again exactly (a piece start before every incomplete shard, with the state
// of the train/validation router there). Written under a temporary name and renamed, after the
// shards it counts were renamed: a crash leaves an older, still valid, state.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "chimera/data/corpus_reader.hpp"

namespace chimera::data {

inline constexpr const char* kPrepStateFile = "prep-state.json";

// Everything about the token stream at a piece start.
struct PrepCheckpoint {
  InputPosition input;
  std::int64_t position = 0;     // tokens routed before this point
  std::int64_t train_last = -1;  // router: stream position of the last train token (-1: none)
  std::int64_t val_last = -1;
  std::int64_t train_routed = 0;  // tokens given to each split (end-of-text marks included)
  std::int64_t val_routed = 0;
  std::int64_t documents = 0;
  std::uint64_t text_bytes = 0;
  std::int64_t bad_lines = 0;
};

struct PrepState {
  std::string settings;  // JSON text of the settings (compared as written)
  bool finished = false;
  int train_shards = 0;  // complete shards
  int val_shards = 0;
  PrepCheckpoint resume;
};

// The state in `dir`, or nullopt when there is none. InputError when it cannot be parsed.
std::optional<PrepState> read_prep_state(const std::string& dir);
void write_prep_state(const std::string& dir, const PrepState& state);

}  // namespace chimera::data
