#include "chimera/data/prep_state.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chimera/core/error.hpp"

namespace chimera::data {

namespace {

std::string state_path(const std::string& dir) {
  return (std::filesystem::path(dir) / kPrepStateFile).string();
}

}  // namespace

std::optional<PrepState> read_prep_state(const std::string& dir) {
  const std::string path = state_path(dir);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const auto j = nlohmann::json::parse(text.str());
    PrepState s;
    s.settings = j.at("settings").dump();
    s.finished = j.at("finished").get<bool>();
    s.train_shards = j.at("train_shards").get<int>();
    s.val_shards = j.at("val_shards").get<int>();
    const auto& r = j.at("resume");
    PrepCheckpoint& c = s.resume;
    c.input.file = r.at("file").get<std::size_t>();
    c.input.offset = r.at("offset").get<std::uint64_t>();
    c.input.line = r.at("line").get<std::uint64_t>();
    c.position = r.at("position").get<std::int64_t>();
    c.train_last = r.at("train_last").get<std::int64_t>();
    c.val_last = r.at("val_last").get<std::int64_t>();
    c.train_routed = r.at("train_routed").get<std::int64_t>();
    c.val_routed = r.at("val_routed").get<std::int64_t>();
    c.documents = r.at("documents").get<std::int64_t>();
    c.text_bytes = r.at("text_bytes").get<std::uint64_t>();
    c.bad_lines = r.at("bad_lines").get<std::int64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("{}: not a state that `chimera prep` wrote ({}); rerun without "
                    "--resume to start over",
                    path, e.what()));
  }
}

void write_prep_state(const std::string& dir, const PrepState& s) {
  const PrepCheckpoint& c = s.resume;
  const nlohmann::json j = {{"settings", nlohmann::json::parse(s.settings)},
                            {"finished", s.finished},
                            {"train_shards", s.train_shards},
                            {"val_shards", s.val_shards},
                            {"resume",
                             {{"file", c.input.file},
                              {"offset", c.input.offset},
                              {"line", c.input.line},
                              {"position", c.position},
                              {"train_last", c.train_last},
                              {"val_last", c.val_last},
                              {"train_routed", c.train_routed},
                              {"val_routed", c.val_routed},
                              {"documents", c.documents},
                              {"text_bytes", c.text_bytes},
                              {"bad_lines", c.bad_lines}}}};
  const std::string path = state_path(dir), temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.flush();
    CHIMERA_REQUIRE(out.good(), "{}: cannot write the prep state (is the disk full?)", temp);
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  CHIMERA_REQUIRE(!ec, "cannot rename {} to {}: {}", temp, path, ec.message());
}

}  // namespace chimera::data
