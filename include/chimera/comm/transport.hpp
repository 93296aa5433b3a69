#pragma once
// The seam under the executor: everything a lowered program does across ranks goes through a
// Transport. Point to point: post a receive, send, test, wait; sums: register a gradient buffer,
// start its sum, progress, wait for all. Two implementations:
//  - MpiTransport (mpi_transport.hpp): MPI_Isend/MPI_Irecv on the pipeline communicator with
//    doorbells, one StageSum per gradient buffer (stage_sum.hpp) over the stage communicators;
//  - LoopbackTransport (loopback_transport.hpp): every worker of every replica in one process, as
//    threads, for tests that run the executor directly.
// Messages are identified by schedule::Message (lower.hpp); a message buffer belongs to the
// transport from post_recv/send until its request has completed.
#include <cstddef>
#include <string>
#include <vector>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/stage_sum.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::comm {

class Transport {
 public:
  using Request = int;
  virtual ~Transport() = default;

  // Point to point between the workers of this pipeline group; every message has the same
  // number of floats.
  virtual Request post_recv(const schedule::Message& m, float* buffer) = 0;
  virtual Request send(const schedule::Message& m, const float* buffer) = 0;
  // True once `r` has completed (its buffer is free again); the request is then gone. Sends
  // complete through progress(), which tests them all at once: call it first.
  virtual bool test(Request r) = 0;
  // Blocks until `r` has completed, progressing outstanding sends and sums meanwhile; `label`
  // names the wait if it never ends. The request is then gone.
  virtual void wait(Request r, const WaitLabel& label) = 0;

  // Registers a gradient buffer to be summed (in place) over the ranks holding it; returns its
  // key. Every rank registers its buffers before any sum starts.
  virtual int add_sum(const GradBuffer& buffer) = 0;
  virtual void start_sum(int key) = 0;
  // Progresses outstanding sums and sends; true while any sum is still running (an emulated op
  // wakes up only for those: a real kernel progresses nothing either).
  virtual bool progress() = 0;
  // Blocks until every started sum has arrived; `context` ends the label of a wait that never
  // ends. Clears the timings of the previous call.
  virtual void wait_sums(const WaitLabel& context) = 0;
  // A sharded optimizer's all-gathers of the updated weights (sharded_sum.hpp): started after
  // the optimizer step, awaited for one summed buffer (its key; -1 none) before the stage's
  // first forward of the next iteration, or all of them (before a save, a validation, the end).
  // A transport whose sums are whole has none to start or await.
  virtual void start_gathers() {}
  virtual void wait_gather(int /*key*/, const WaitLabel& /*context*/) {}
  virtual void wait_gathers() {}
  // When this iteration's sums started and completed (for traces).
  virtual std::vector<SumTiming> sum_timings() const = 0;

  // How messages and logs name worker `worker` of this group: "rank 5", "worker 2".
  virtual std::string peer_name(int worker) const = 0;
};

}  // namespace chimera::comm
