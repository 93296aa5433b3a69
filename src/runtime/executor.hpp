#pragma once
// The executor runs one worker's lowered program for one iteration, instruction by instruction:
// compute ops through StageCompute, messages and gradient sums through a comm::Transport (MPI
// between ranks, or the in-process loopback in tests), progress polled between instructions.
// It adds no communication of its own: every message, sum and wait is an instruction.
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "chimera/comm/core_sharing.hpp"
#include "chimera/comm/transport.hpp"
#include "chimera/io/trace.hpp"
#include "chimera/schedule/program.hpp"
#include "stage_compute.hpp"

namespace chimera::runtime {

// Inputs of one iteration, indexed by schedule micro-batch; only the pointers a worker needs
// (stage 0 / last stage of the micro-batch's pipe) must be set.
struct MicroBatchInputs {
  std::vector<const std::int32_t*> tokens;
  std::vector<const std::int32_t*> targets;
};

struct IterationResult {
  double loss_sum = 0.0;  // over the last-stage forwards this worker ran
  int loss_count = 0;
  double wall_s = 0.0;       // program start to gradients summed
  double compute_s = 0.0;    // time inside compute ops
  double grad_wait_s = 0.0;  // time waiting for allreduces after the last op (exposed)
  // Of wall_s - compute_s, the time this rank was runnable but had no core (more ranks than
  // cores); nullopt where the kernel does not say.
  std::optional<double> idle_queued_s;
};

class Executor {
 public:
  // Registers the compute's gradient buffers with `transport` unless the schedule is
  // forward-only. `sched`, `program`, `compute` and `transport` must outlive the executor.
  Executor(const schedule::Schedule& sched, const schedule::Program& program, int worker,
           StageCompute& compute, comm::Transport& transport);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs one iteration; `trace` (may be null) receives compute, p2p-wait and allreduce events
  // with timestamps relative to `trace_origin_s`.
  IterationResult run(std::int64_t step, const MicroBatchInputs& inputs, float loss_scale,
                      std::vector<io::TraceEvent>* trace, double trace_origin_s);

 private:
  comm::RunQueueClock run_queue_;  // of the thread that runs the program
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chimera::runtime
