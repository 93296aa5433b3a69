#pragma once
// SIGTERM and SIGUSR1 (Slurm's warning before a time limit) ask the run to stop after the
// current step. The handler only records the signal; the step loop reads it between steps and
// agrees on it with the step's reduction, so every rank stops after the same step.

#include <string>

namespace chimera::runtime {

class StopSignals {
 public:
  // Installs the handlers (for the rest of the process).
  StopSignals();
  // The signal received so far, 0 if none.
  int received() const;
};

// "SIGTERM", "SIGUSR1", else "signal N", for the log.
std::string signal_name(int signal);

}  // namespace chimera::runtime
