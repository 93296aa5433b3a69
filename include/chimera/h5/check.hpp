#pragma once
// H5_CHECK: an HDF5 call that must succeed (its failure is a bug or a failing file system, not bad
// user input). On failure it throws chimera::Error with file, line, rank, the call, and the
// innermost message of HDF5's error stack. HDF5's own stack printing is switched off by
// h5::silence_library_errors() so that a failure is one line, not forty.
#include <hdf5.h>

#include <string>
#include <utility>

#include "chimera/core/error.hpp"

namespace chimera::h5 {

// Turns off HDF5's automatic error-stack printing for this process (idempotent, cheap).
void silence_library_errors();

// The most specific message on HDF5's current error stack ("" when the stack is empty), e.g.
// "truncated file: eof = 1024, sblock->base_addr = 0, stored_eof = 4096".
std::string library_error_message();

namespace detail {
[[noreturn]] void fail_h5(const char* file, int line, const char* expr, const std::string& msg);
inline std::string check_message() {
  return {};
}
template <typename... Args>
std::string check_message(fmt::format_string<Args...> f, Args&&... args) {
  return fmt::format(f, std::forward<Args>(args)...);
}
}  // namespace detail

}  // namespace chimera::h5

// Evaluates `expr` once; a negative result (HDF5's failure convention for herr_t, hid_t and
// htri_t) throws chimera::Error. Yields the value, so ids can be checked inline. An optional
// fmt-style message adds context: H5_CHECK(H5Dread(...), "reading {}", name).
#define H5_CHECK(expr, ...)                                                              \
  ([&]() {                                                                               \
    auto h5_check_result_ = (expr);                                                      \
    if (h5_check_result_ < 0) [[unlikely]] {                                             \
      ::chimera::h5::detail::fail_h5(__FILE__, __LINE__, #expr,                          \
                                     ::chimera::h5::detail::check_message(__VA_ARGS__)); \
    }                                                                                    \
    return h5_check_result_;                                                             \
  }())
