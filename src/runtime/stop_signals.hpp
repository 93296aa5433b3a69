#pragma once
// SIGTERM and SIGUSR1 (Slurm's warning before a time limit) ask the run to stop after the
// current step. The handler only records the signal; the step loop reads it between steps and
// agrees on it with the step's reduction, so every rank stops after the same step.

namespace chimera::runtime {

class StopSignals {
 public:
  // Installs the handlers (for the rest of the process).
  StopSignals();
  // The signal received so far, 0 if none.
  int received() const;
};

}  // namespace chimera::runtime
