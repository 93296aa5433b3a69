#pragma once
// Tests of bad input check the message users will read, not only that something was thrown.
#include <string>

#include "chimera/core/error.hpp"

namespace chimera::testing {

// The message of the InputError `f` throws, or "no InputError" when it throws none.
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

}  // namespace chimera::testing
