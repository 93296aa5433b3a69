#include "chimera/io/paths.hpp"

#include <filesystem>
#include <system_error>

#include "chimera/core/error.hpp"

namespace chimera::io {

void create_parent_directory(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  CHIMERA_REQUIRE(!ec, "cannot create the folder '{}' for '{}': {}", parent.string(), path,
                  ec.message());
}

}  // namespace chimera::io
