#include "stop_signals.hpp"

#include <csignal>

namespace chimera::runtime {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
}
}  // namespace

StopSignals::StopSignals() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

int StopSignals::received() const {
  return static_cast<int>(g_stop_signal);
}

std::string signal_name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGUSR1) return "SIGUSR1";
  return "signal " + std::to_string(signal);
}

}  // namespace chimera::runtime
