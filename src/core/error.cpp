#include "chimera/core/error.hpp"

#include <atomic>

namespace chimera {

namespace {
std::atomic<int> g_rank{-1};
}

void set_process_rank(int rank) {
  g_rank.store(rank);
}
int process_rank() {
  return g_rank.load();
}

std::string rank_prefix() {
  const int r = process_rank();
  return r < 0 ? std::string() : fmt::format("[rank {}] ", r);
}

int exit_status(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) != nullptr) return kExitInput;
  if (dynamic_cast<const DivergedError*>(&e) != nullptr) return kExitDiverged;
  return kExitInternal;
}

namespace detail {

void fail_check(const char* file, int line, const char* expr, const std::string& msg) {
  throw Error(fmt::format("{}{}:{}: check '{}' failed: {}", rank_prefix(), file, line, expr, msg));
}

void fail_input(const std::string& msg) {
  throw InputError(msg);
}

}  // namespace detail
}  // namespace chimera
