#pragma once
// The loaders take paths: each fuzz input is written to a per-process temporary file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace chimera::fuzz {

inline std::string write_input(const std::uint8_t* data, std::size_t size, const char* suffix) {
  static const std::string path = "/tmp/chimera-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace chimera::fuzz
