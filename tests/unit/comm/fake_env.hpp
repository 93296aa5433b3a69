#pragma once
// A launcher's environment for the tests of rules that read one (comm::EnvLookup).
#include <map>
#include <string>

#include "chimera/comm/local_rank.hpp"

namespace chimera::comm::testing {

using Env = std::map<std::string, std::string>;

// Looks names up in `env`, which must outlive the lookup.
inline EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace chimera::comm::testing
