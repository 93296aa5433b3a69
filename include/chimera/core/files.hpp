#pragma once
// Input paths that name a directory: a directory opens as a stream that reads nothing (a config
// passed for an empty one) or fails with a message that does not say why.
#include <string>
#include <string_view>

namespace chimera {

// InputError "<path>: is a directory (expected <expected>)" when `path` names a directory.
void require_not_a_directory(const std::string& path, std::string_view expected);

}  // namespace chimera
