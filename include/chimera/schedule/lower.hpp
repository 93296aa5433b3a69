#pragma once
// Lowering a verified Schedule to per-worker programs (program.hpp). The rules, which the runtime
// relies on:
//   * Messages: an F at stage s > 0 needs the activation of (pipe, s-1, mb); a B or I at stage
//     s < stages-1 needs the input gradient of (pipe, s+1, mb). One message per micro-batch, so a
//     doubled forward sends and receives two. A W needs only its own I; a B/I its own F.
//   * Same-worker hand-offs have no instructions at all: when the producer runs on the same worker
//     (placement[pipe][s-1] == placement[pipe][s] for an F, [s+1] == [s] for a B/I) the runtime
//     passes the buffer locally. A Message with src == dst never appears.
//   * Send: right after the Compute that produced the message.
//   * PostRecv: one compute op ahead. The receives of op k are posted right after op k-2 and its
//     sends (the receives of ops 0 and 1 at the start), i.e. before the worker waits for op k-1.
//     At most two ops' input buffers are posted at any time, so receive buffers stay bounded
//     (posting all receives at the start would hold every input of the iteration at once).
//   * WaitRecv: right before the Compute that consumes the message.
//   * GradReady(stage): right after the worker's last B (or W) op of that stage, after its sends;
//     that stage's gradient sum starts there. The sums of a worker start in program order.
//   * TiedGradReady: right after the GradReady of the worker's later last gradient op of stage 0
//     and the last stage (only on workers holding either); the tied token table's sum starts
//     there. A forward-only schedule has neither.
//   * WaitSums: once, at the end of every program.
//   * WaitGather(stage), only with LowerOptions::shard_optimizer: right before the worker's first
//     Compute of that stage (after that op's WaitRecvs), once per held stage. The stage's weights
//     are gathered from the holders' updated shards after the previous optimizer step; the first
//     op that reads them waits for the gather here.
// Per op k the stream is: PostRecv(inputs of k+1), WaitRecv(inputs of k), [WaitGather], Compute k,
// Send(outputs of k), [GradReady], [TiedGradReady]; then WaitSums. Message order within one op
// follows the op's micro-batch order.
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

struct LowerOptions {
  // Each stage's optimizer state is sharded over the stage's holders: every held stage gets a
  // WaitGather (its gradient sum, started at GradReady, is then a reduce-scatter).
  bool shard_optimizer = false;
};

// Verifies the schedule (throws chimera::Error if it is broken) and lowers it.
Program lower(const Schedule& schedule, const LowerOptions& options = {});

}  // namespace chimera::schedule
