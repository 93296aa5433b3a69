#include "chimera/io/paths.hpp"

#include <filesystem>
#include <fstream>
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

void require_writable(const std::string& path, const std::string& what) {
  try {
    create_parent_directory(path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} {}: {}", what, path, e.what()));
  }
  std::error_code ec;
  CHIMERA_REQUIRE(!std::filesystem::is_directory(path, ec),
                  "{} {}: is a directory; expected the name of a file to write", what, path);
  const bool existed = std::filesystem::exists(path, ec);
  const bool writable = std::ofstream(path, std::ios::app).good();
  if (!existed) std::filesystem::remove(path, ec);
  CHIMERA_REQUIRE(writable, "{} {}: cannot be written (permissions?)", what, path);
}

void write_via_temporary(const std::string& path,
                         const std::function<void(const std::string& temporary)>& write) {
  std::error_code ec;
  CHIMERA_REQUIRE(!std::filesystem::is_directory(path, ec),
                  "{}: is a directory; expected the name of a file to write", path);
  const std::string temporary = path + ".tmp";
  try {
    write(temporary);
    std::filesystem::rename(temporary, path, ec);
    CHIMERA_REQUIRE(!ec, "{}: cannot rename {} to it ({})", path, temporary, ec.message());
  } catch (...) {
    std::filesystem::remove(temporary, ec);
    throw;
  }
}

void require_not_an_input(const std::string& path, std::initializer_list<std::string> inputs) {
  for (const std::string& input : inputs) {
    std::error_code ec;
    CHIMERA_REQUIRE(!std::filesystem::equivalent(path, input, ec),
                    "{}: is also an input ({}); writing it would destroy what is being read, so "
                    "name another output",
                    path, input);
  }
}

}  // namespace chimera::io
