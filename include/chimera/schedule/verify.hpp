#pragma once
// The verifier (docs/DESIGN.md §3): a schedule is run only if it is complete and cannot deadlock.
//   completeness  every micro-batch runs F and B (or I and W) at every stage of its pipe, exactly
//                 once, on the worker placement names; nothing else is scheduled. A forward-only
//                 schedule runs exactly the F ops.
//   deadlock      the schedule cannot hang under the stated send semantics (Semantics below);
//                 a cycle is reported as a shortest cyclic wait, op by op, with why each op
//                 waits for the next.
#include <string>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

struct VerifyResult {
  bool ok = true;
  std::string problem;  // the first problem found, one line; empty when ok
};

// What a send is assumed to do. Each worker runs its ops in order; a receive blocks until its
// message was sent.
enum class Semantics {
  // A send completes without its receive (buffered, or non-blocking and waited for only at the
  // end: the runtime's MPI_Isend and the loopback). The schedule is deadlock-free iff program
  // order plus data dependencies are acyclic; this holds for any placement of the receives.
  Eager,
  // A send completes only when the receiver has posted the matching receive (MPI_Ssend, or a
  // transport without buffering), and the sender goes on only after it completes. Checked on the
  // lowered program (lower.hpp) as it is: receives posted one op ahead, each Send right after the
  // op that produced it blocks its worker until the receiver has executed the matching
  // PostRecv. Deadlock-free iff the instructions, with program order, WaitRecv after its Send
  // and (here) Send after its PostRecv, are acyclic. Stricter than Eager: a schedule that
  // deadlocks eagerly deadlocks here too; two workers that each send before they post the
  // receive of the other's message deadlock only here.
  Rendezvous,
};

const char* semantics_name(Semantics semantics);  // "eager", "rendezvous"

// Non-throwing form, for tests and tools that want to report rather than stop. Without
// semantics: Eager, the runtime's.
VerifyResult check(const Schedule& schedule);
VerifyResult check(const Schedule& schedule, Semantics semantics);

// Throws chimera::Error describing the first problem (Eager).
void verify(const Schedule& schedule);

// What a lowered program promises beyond deadlock freedom.
struct ProgramFacts {
  // The workers start their gradient sums in an order consistent with one global order
  // (sum_order.hpp): the sums may run on NCCL, which blocks a rank in each sum until its whole
  // group has started it. Sums through MPI_Iallreduce need no such order.
  bool sums_in_one_order = true;
  // Every held stage has a WaitGather (the lowering for sharded optimizer state).
  bool gathers_weights = false;
};

// Checks that `program` is the lowering of `schedule` the executor can run: every compute op
// once and in order, every Send matched by exactly one PostRecv before one WaitRecv on its
// receiver, one GradReady per held stage after its last gradient op, one TiedGradReady on the
// holders of the tied table, WaitSums last, and either no WaitGather or one per held stage on
// every worker, right before its first op of the stage. Throws chimera::Error naming the first
// violation.
ProgramFacts verify_program(const Schedule& schedule, const Program& program);

}  // namespace chimera::schedule
