#include "chimera/core/files.hpp"

#include <filesystem>
#include <system_error>

#include "chimera/core/error.hpp"

namespace chimera {

void require_not_a_directory(const std::string& path, std::string_view expected) {
  std::error_code ec;
  CHIMERA_REQUIRE(!std::filesystem::is_directory(path, ec), "{}: is a directory (expected {})",
                  path, expected);
}

}  // namespace chimera
