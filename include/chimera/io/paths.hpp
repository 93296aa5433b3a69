#pragma once
// Output files (metrics, traces) may name folders that do not exist yet: `runs/demo/m.jsonl`.
#include <string>

namespace chimera::io {

// Creates the folder that will hold `path`; InputError naming it when that is impossible.
void create_parent_directory(const std::string& path);

}  // namespace chimera::io
