#pragma once
// Eager gradient synchronisation (LBANN's rule: a gradient is ready when its last contributor
// finished). The executor calls start() the moment a worker's last backward of a stage is done;
// the in-place MPI_Iallreduce then overlaps the backward ops that remain, progressed by poll()
// between ops and during waits. wait_all() runs before the optimizer step. A buffer in GPU memory
// may instead be summed by an AsyncSum (NCCL on a GPU stream, or MPI on a host copy), started and
// tested at the same moments.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

// A sum of one gradient buffer over its ranks that runs outside this class's MPI_Iallreduce.
class AsyncSum {
 public:
  virtual ~AsyncSum() = default;
  virtual void start() = 0;  // non-blocking
  virtual bool test() = 0;   // true once the buffer holds the sum (called until it is)
};

class GradSync {
 public:
  struct Timing {
    std::string name;
    double start_s = 0.0;  // when the allreduce was started
    double done_s = 0.0;   // when a poll or wait first saw it complete
  };

  // Registers a buffer to be summed over `comm`; returns its key. Keys are stable across
  // iterations; MPI_COMM_NULL registers nothing and returns -1.
  int add(std::string name, float* data, std::size_t count, MPI_Comm comm);
  // Registers a sum that `sum` carries out; returns its key.
  int add(std::string name, std::unique_ptr<AsyncSum> sum);

  void start(int key);  // non-blocking in-place sum
  bool poll();          // tests every outstanding sum; true while any is still running
  // Waits for all started; every key must have started. `context` (may be empty) ends the
  // watchdog's label: "allreduce of gradient 'stage 2' (step 7)".
  void wait_all(const WaitPolicy& policy, const WaitLabel& context = {});

  bool started(int key) const;
  const std::vector<Timing>& timings() const { return timings_; }
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    float* data = nullptr;
    std::size_t count = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    std::unique_ptr<AsyncSum> async;  // when set, it does the sum instead of MPI_Iallreduce
    bool running = false;             // started and not yet seen complete
    bool started = false;
  };
  std::vector<Slot> slots_;
  std::vector<Timing> timings_;
};

}  // namespace chimera::comm
