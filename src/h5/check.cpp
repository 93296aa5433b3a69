#include "chimera/h5/check.hpp"

namespace chimera::h5 {

void silence_library_errors() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {
// H5E_WALK_UPWARD starts at the innermost frame, where the failure was first detected: its
// description is the most specific one.
herr_t keep_innermost(unsigned n, const H5E_error2_t* entry, void* client) {
  if (n == 0 && entry->desc != nullptr) *static_cast<std::string*>(client) = entry->desc;
  return 0;
}
}  // namespace

std::string library_error_message() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &message);
  return message;
}

namespace detail {

void fail_h5(const char* file, int line, const char* expr, const std::string& msg) {
  const std::string library = library_error_message();
  throw Error(fmt::format("{}{}:{}: HDF5 call '{}' failed{}{}{}", rank_prefix(), file, line, expr,
                          msg.empty() ? "" : ": ", msg,
                          library.empty() ? "" : " (HDF5: " + library + ")"));
}

}  // namespace detail
}  // namespace chimera::h5
