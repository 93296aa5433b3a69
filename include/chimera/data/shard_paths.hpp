#pragma once
// The files of a token dataset as the user names them (data.train, data.val, inspect): each
// entry is a file, or a glob pattern (`*`, `?`, `[...]`, e.g. "data/web/train-*.h5") that stands
// for the files it matches, in the byte order of their names: the order of `chimera prep`'s
// numbered shards.
#include <string>
#include <vector>

namespace chimera::data {

// InputError naming a pattern that matches no file.
std::vector<std::string> expand_shard_paths(const std::vector<std::string>& entries);

}  // namespace chimera::data
