#pragma once
// Test hook, for the fault tests only: CHIMERA_TEST_HANG_AT="RANK:STEP" makes that world rank
// stop answering before step STEP (1-based, as the log counts), as a rank stuck in a driver or
// on a dead node would, so that runtime.watchdog_s can be tested; "RANK:STEP:save" makes it stop
// inside the save of the checkpoint of step STEP, as a rank stuck in a failed file system would,
// for checkpoint.save_timeout_s. Unset in every real run.
#include <chrono>
#include <cstdint>

namespace chimera::runtime {

// Test hooks that slow I/O down, read once from the environment: CHIMERA_TEST_READ_LATENCY_MS
// (each sample read waits that long more, as a parallel file system's latency would) and
// CHIMERA_TEST_SAVE_WRITE_DELAY_MS (each piece of a background checkpoint write). Zero when unset;
// unset in every real run.
std::chrono::microseconds test_delay_from_environment(const char* variable);

struct HangHook {
  int rank = -1;
  long long step = -1;
  bool in_save = false;

  static HangHook from_environment();
  // `at_step` 1-based; `saving`: inside the save of that step's checkpoint, else before it.
  void maybe_hang(int my_rank, std::int64_t at_step, bool saving) const;
};

}  // namespace chimera::runtime
