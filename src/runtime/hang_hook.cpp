#include "hang_hook.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

HangHook HangHook::from_environment() {
  HangHook h;
  if (const char* v = std::getenv("CHIMERA_TEST_HANG_AT")) {
    char phase[8] = {};
    const int fields = std::sscanf(v, "%d:%lld:%7s", &h.rank, &h.step, phase);
    h.in_save = fields == 3 && std::string_view(phase) == "save";
    if (fields < 2 || (fields == 3 && !h.in_save)) h = HangHook{};
  }
  return h;
}

void HangHook::maybe_hang(int my_rank, std::int64_t at_step, bool saving) const {
  if (saving != in_save || my_rank != rank || at_step != step) return;
  log::info_all("test hook CHIMERA_TEST_HANG_AT: rank {} hangs {} step {}", rank,
                saving ? "in the save of" : "before", step);
  while (true) sleep_seconds(1.0);
}

std::chrono::microseconds test_delay_from_environment(const char* variable) {
  const char* text = std::getenv(variable);
  const double ms = text != nullptr ? std::strtod(text, nullptr) : 0.0;
  return std::chrono::microseconds(ms > 0 ? static_cast<std::int64_t>(ms * 1e3) : 0);
}

}  // namespace chimera::runtime
