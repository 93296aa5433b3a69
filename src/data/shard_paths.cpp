#include "chimera/data/shard_paths.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "chimera/core/error.hpp"

namespace chimera::data {

std::vector<std::string> expand_shard_paths(const std::vector<std::string>& entries) {
  std::vector<std::string> out;
  for (const std::string& entry : entries) {
    std::error_code ec;
    // A file whose name holds a glob character is still that file.
    if (entry.find_first_of("*?[") == std::string::npos || std::filesystem::exists(entry, ec)) {
      out.push_back(entry);
      continue;
    }
    glob_t found{};
    const int status = glob(entry.c_str(), GLOB_ERR, nullptr, &found);
    std::vector<std::string> matches(found.gl_pathv, found.gl_pathv + found.gl_pathc);
    globfree(&found);
    CHIMERA_REQUIRE(status == 0 && !matches.empty(),
                    "{}: the pattern matches no file (expected token dataset shards, e.g. "
                    "DIR/train-*.h5 from `chimera prep --shard-tokens`)",
                    entry);
    std::sort(matches.begin(), matches.end());
    out.insert(out.end(), matches.begin(), matches.end());
  }
  return out;
}

}  // namespace chimera::data
