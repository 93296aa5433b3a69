#pragma once
// The schedule IR (docs/DESIGN.md §3): a schedule is data, made by a generator and verified
// before anything runs. No MPI, no model.
//
// Terms:
//   worker       one of the D ranks of a pipeline group (0..workers-1)
//   stage        a model stage, 0..stages-1. For interleaved schedules stages = D * v.
//                All pipes cover every model stage 0..stages-1 in order.
//   pipe         a pipeline: placement[pipe][stage] names the worker that runs that stage for
//                the micro-batches of that pipe. Chimera has 2f pipes (f down, f up).
//   micro-batch  0..schedule_micro_batches-1, the ids the schedule orders. For backward halving
//                each configured micro-batch is split in two (mb_split = 2), so there are 2N.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::schedule {

enum class OpKind : std::uint8_t {
  F,  // forward
  B,  // full backward (input and weight gradients)
  I,  // input-gradient half of a split backward (zero bubble)
  W,  // weight-gradient half of a split backward (zero bubble)
};

char op_letter(OpKind kind);

struct Op {
  OpKind kind = OpKind::F;
  int pipe = 0;
  int stage = 0;
  std::vector<int> mbs;  // micro-batches this op covers (2 for a doubled forward)

  bool operator==(const Op&) const = default;
};

struct Schedule {
  std::string scheme;   // gpipe | 1f1b | gems | interleaved | chimera | zb-h1 | zb-v | dualpipev
  std::string variant;  // chimera: direct | doubling | halving; "" otherwise
  int workers = 0;      // D
  int stages = 0;       // model stages (D, D*v for interleaved, 2D for the V's)
  // Schedule micro-batch ids: N x mb_split, not the configured N (configured_micro_batches()).
  // JSON and the docs call it "micro_batches" (DESIGN §3).
  int schedule_micro_batches = 0;
  int mb_split = 1;  // schedule micro-batches per configured micro-batch (halving: 2)
  // Evaluation: only forwards, in the training schedule's order (schedule::forward_only). No
  // backward is scheduled and no gradient is summed.
  bool forward_only = false;
  std::vector<std::vector<int>> placement;  // [pipe][stage] -> worker
  std::vector<int> pipe_of;                 // [micro-batch] -> pipe
  std::vector<std::vector<Op>> ops;         // [worker] -> ordered compute ops

  int pipes() const { return static_cast<int>(placement.size()); }
  // N: the configured micro-batches (parallel.micro_batches), each mb_split schedule ones.
  int configured_micro_batches() const { return schedule_micro_batches / mb_split; }
};

// Samples per schedule micro-batch for B = `micro_batch_size` samples per configured one:
// B / mb_split. An InputError naming `what` (B's key or flag) where mb_split does not divide B.
int schedule_micro_batch_size(const Schedule& schedule, int micro_batch_size,
                              std::string_view what);

// "F0d0", "F0+1u3", "B5d2", "I2d1": kind, micro-batches, pipe direction, stage (DESIGN §3 grid).
// With an even number of pipes the first half are down pipes (d), the rest up pipes (u); a
// single pipe is down.
std::string op_label(const Schedule& schedule, const Op& op);

}  // namespace chimera::schedule
