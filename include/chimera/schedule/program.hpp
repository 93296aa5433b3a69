#pragma once
// Lowering: a verified Schedule becomes one program per worker — its compute ops plus everything
// that crosses a rank boundary, derived from the schedule: every send and receive (from the data
// dependencies), the point where each stage's gradient is final on that worker (its sum starts
// there, in program order), the tied-embedding reduction, and the final wait for the sums. The
// executor runs exactly these instructions; the simulator prices them. Communication is never
// hand-written.
#include <compare>
#include <cstdint>
#include <vector>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

enum class Payload : std::uint8_t {
  Activation,  // output of F at (pipe, stage, mb), input of F at (pipe, stage + 1, mb)
  Gradient,    // input-gradient of B/I at (pipe, stage, mb), output-gradient of (pipe, stage - 1)
};

// What a message is within one run of a schedule: the one key of the executor's mailbox, both
// transports and the simulator. A new kind of payload is one more Payload value, nothing else.
struct MessageKey {
  Payload payload = Payload::Activation;
  int pipe = 0;
  int stage = 0;  // the stage that produced the message
  int mb = 0;

  auto operator<=>(const MessageKey&) const = default;
  // A number below message_key_count() for a schedule of `micro_batches` micro-batch ids: the
  // MPI tag. The pipe is left out, as a micro-batch runs in one pipe only.
  int index(int micro_batches) const;
};

// How many index() values `schedule`'s messages can take: 2 payloads x stages x micro-batches.
std::int64_t message_key_count(const Schedule& schedule);

struct Message {
  Payload payload = Payload::Activation;
  int pipe = 0;
  int stage = 0;  // the stage that produced the message
  int mb = 0;
  int src = 0;  // sending worker
  int dst = 0;  // receiving worker

  MessageKey key() const { return {payload, pipe, stage, mb}; }
  bool operator==(const Message&) const = default;
};

enum class InstrKind : std::uint8_t {
  PostRecv,  // post a non-blocking receive for `msg`
  WaitRecv,  // block until `msg` has arrived (right before the compute op that consumes it)
  Compute,   // run ops[worker][op_index]
  Send,      // start a non-blocking send of `msg` (right after the op that produced it)
  // `stage`'s gradient is final on this worker: its sum over the holders starts (an allreduce; a
  // reduce-scatter when the optimizer state is sharded, each holder receiving its shard's sum).
  GradReady,
  // The worker's last gradient of the stages that use the tied token table (stage 0, the last
  // stage) is final: the worker adds up its parts of the table's gradient and starts its sum over
  // every rank holding either end. Follows the GradReady of the later of those stages.
  TiedGradReady,
  // End of the iteration: every send has completed and every sum started here has arrived. Last
  // instruction of every program.
  WaitSums,
  // Only when the optimizer state is sharded over each stage's holders (LowerOptions): block until
  // `stage`'s full weights have arrived. Each holder updates only its shard of the weights; the
  // all-gather that returns the rest starts after the previous iteration's optimizer step, outside
  // the program, and must be complete here: right before the worker's first Compute of that stage
  // in the iteration (after that op's WaitRecvs). One per held stage.
  WaitGather,
};

// "post", "wait", "compute", "send", "grad-ready", "tied-grad-ready", "wait-sums", "wait-gather".
const char* instr_name(InstrKind kind);

struct Instr {
  InstrKind kind = InstrKind::Compute;
  int op_index = -1;  // Compute
  Message msg{};      // PostRecv, WaitRecv, Send
  int stage = -1;     // GradReady, WaitGather

  bool operator==(const Instr&) const = default;
};

struct Program {
  std::vector<std::vector<Instr>> workers;  // [worker] -> instruction stream
};

}  // namespace chimera::schedule
