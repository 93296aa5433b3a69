#pragma once
// Eager gradient sums (LBANN's rule: a gradient is ready when its last contributor finished). The
// executor starts a stage's sum the moment a worker's last backward of that stage is done; the
// in-place sum then overlaps the backward ops that remain, tested between ops and during waits,
// and every sum is awaited before the optimizer step.
//
// One StageSum per summed buffer owns all of it: the buffer, the request in flight and its
// timing. How the sum is carried out is the one seam: MpiSum (MPI_Iallreduce on the buffer) by
// default, or what a SumFactory makes for a buffer in device memory (NCCL on a GPU stream, MPI on
// a host copy; src/runtime/grad_sums.cpp). A sharded optimizer changes a StageSum's begin/arrived
// (reduce-scatter, then an all-gather after the step) without touching its callers.
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

// One contiguous gradient buffer to be summed across the ranks holding it.
struct GradBuffer {
  std::string name;  // "stage 3", "tied wte"
  int stage = -1;    // model stage, or -1 for the tied token table
  float* data = nullptr;
  std::size_t count = 0;
};

// When a sum started and completed, for traces.
struct SumTiming {
  std::string name;
  double start_s = 0.0;  // when the sum was started
  double done_s = 0.0;   // when a test or wait first saw it complete
};

class StageSum {
 public:
  explicit StageSum(GradBuffer buffer);
  virtual ~StageSum() = default;
  StageSum(const StageSum&) = delete;
  StageSum& operator=(const StageSum&) = delete;

  const GradBuffer& buffer() const { return buffer_; }
  const SumTiming& timing() const { return timing_; }
  bool started() const { return started_; }  // this iteration
  bool running() const { return running_; }  // started and not yet seen complete

  void start();  // non-blocking; once per iteration
  bool test();   // true once the buffer holds the sum
  // Waits until the sum has arrived, testing `others` too meanwhile so that they progress; then
  // ready for the next iteration's start(). `context` (may be empty) ends the watchdog's label:
  // "allreduce of gradient 'stage 2' (step 7)".
  void finish(const std::function<void()>& others, const WaitPolicy& policy,
              const WaitLabel& context);

  // A sharded sum's second half (sharded_sum.hpp): once the optimizer has updated this rank's
  // shard, the all-gather that returns the full weights. A no-op for a whole-buffer sum.
  void start_gather();
  bool test_gather();  // true once the weights are whole (or no gather was started)
  bool gathering() const { return gathering_; }
  // Waits until the weights are whole, testing `others` meanwhile, as finish().
  void finish_gather(const std::function<void()>& others, const WaitPolicy& policy,
                     const WaitLabel& context);

 protected:
  virtual void begin() = 0;    // starts the sum of buffer()
  virtual bool arrived() = 0;  // tests it; called until true
  virtual bool gathers() const { return false; }
  virtual void begin_gather() {}
  virtual bool gather_arrived() { return true; }
  // " over ranks 0, 2 (hosts n1, n3)" where the job spans hosts (rank_hosts.hpp), else "".
  virtual std::string participants() const { return ""; }
  // Only when the watchdog trips: which participants answer no probe (peer_probe.hpp), as
  // "; rank 2 on host n3 answered no probe within 10 s"; "" where it cannot tell.
  virtual std::string silent_participants() const { return ""; }

 private:
  // Waits while (this->*busy)() holds, testing `others`; `what` starts the watchdog's label.
  void await(bool (StageSum::*busy)() const, const char* what, const std::function<void()>& others,
             const WaitPolicy& policy, const WaitLabel& context);

  GradBuffer buffer_;
  SumTiming timing_;
  bool started_ = false;
  bool running_ = false;
  bool gathering_ = false;
};

// MPI_Iallreduce in place over `comm`.
class MpiSum final : public StageSum {
 public:
  MpiSum(GradBuffer buffer, MPI_Comm comm);

 private:
  void begin() override;
  bool arrived() override;
  std::string participants() const override;
  std::string silent_participants() const override;
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Makes the sum of a buffer over `comm` where MpiSum will not do (buffers in GPU memory); null
// leaves it to MpiSum.
using SumFactory = std::function<std::unique_ptr<StageSum>(const GradBuffer&, MPI_Comm)>;

// The sums of one rank's buffers, by key (registration order).
class StageSums {
 public:
  // `comm` MPI_COMM_NULL registers nothing and returns -1; keys are stable across iterations.
  int add(const GradBuffer& buffer, MPI_Comm comm, const SumFactory& make = {});
  void start(int key) { sums_.at(static_cast<std::size_t>(key))->start(); }
  bool poll();  // tests every running sum and gather; true while any still runs
  // Waits for every sum; each must have started this iteration.
  void wait_all(const WaitPolicy& policy, const WaitLabel& context = {});
  // Sharded sums: after the optimizer step, starts every all-gather of the updated weights; then
  // waits for the one of `key` (-1: none), or for all of them.
  void start_gathers();
  void wait_gather(int key, const WaitPolicy& policy, const WaitLabel& context = {});
  void wait_gathers(const WaitPolicy& policy, const WaitLabel& context = {});
  std::vector<SumTiming> timings() const;
  int size() const { return static_cast<int>(sums_.size()); }

 private:
  std::vector<std::unique_ptr<StageSum>> sums_;
};

}  // namespace chimera::comm
