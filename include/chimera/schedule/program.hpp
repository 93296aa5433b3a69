#pragma once
// Lowering: a verified Schedule becomes one program per worker — its compute ops plus every
// send and receive derived from the data dependencies, and the point where each stage's gradient
// is final on that worker (its allreduce may start there). Communication is never hand-written.
#include <vector>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

enum class Payload : std::uint8_t {
  Activation,  // output of F at (pipe, stage, mb), input of F at (pipe, stage + 1, mb)
  Gradient,    // input-gradient of B/I at (pipe, stage, mb), output-gradient of (pipe, stage - 1)
};

struct Message {
  Payload payload = Payload::Activation;
  int pipe = 0;
  int stage = 0;  // the stage that produced the message
  int mb = 0;
  int src = 0;  // sending worker
  int dst = 0;  // receiving worker

  bool operator==(const Message&) const = default;
};

enum class InstrKind : std::uint8_t {
  PostRecv,   // post a non-blocking receive for `msg`
  WaitRecv,   // block until `msg` has arrived (right before the compute op that consumes it)
  Compute,    // run ops[worker][op_index]
  Send,       // start a non-blocking send of `msg` (right after the op that produced it)
  GradReady,  // `stage`'s gradient is final on this worker: its allreduce may start
};

struct Instr {
  InstrKind kind = InstrKind::Compute;
  int op_index = -1;  // Compute
  Message msg{};      // PostRecv, WaitRecv, Send
  int stage = -1;     // GradReady

  bool operator==(const Instr&) const = default;
};

struct Program {
  std::vector<std::vector<Instr>> workers;  // [worker] -> instruction stream
};

}  // namespace chimera::schedule
