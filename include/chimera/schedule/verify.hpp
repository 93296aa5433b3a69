#pragma once
// The verifier (docs/DESIGN.md §3): a schedule is run only if it is complete and cannot deadlock.
//   completeness  every micro-batch runs F and B (or I and W) at every stage of its pipe, exactly
//                 once, on the worker placement names; nothing else is scheduled. A forward-only
//                 schedule runs exactly the F ops.
//   deadlock      program order plus data dependencies form an acyclic graph. Sends are
//                 non-blocking and receives are posted before they are waited on (see lower.hpp),
//                 so an acyclic graph is a run that cannot hang.
#include <string>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

struct VerifyResult {
  bool ok = true;
  std::string problem;  // the first problem found, one line; empty when ok
};

// Non-throwing form, for tests and tools that want to report rather than stop.
VerifyResult check(const Schedule& schedule);

// Throws chimera::Error describing the first problem.
void verify(const Schedule& schedule);

// What a lowered program promises beyond deadlock freedom.
struct ProgramFacts {
  // The workers start their gradient sums in an order consistent with one global order
  // (sum_order.hpp): the sums may run on NCCL, which blocks a rank in each sum until its whole
  // group has started it. Sums through MPI_Iallreduce need no such order.
  bool sums_in_one_order = true;
};

// Checks that `program` is the lowering of `schedule` the executor can run: every compute op
// once and in order, every Send matched by exactly one PostRecv before one WaitRecv on its
// receiver, one GradReady per held stage after its last gradient op, one TiedGradReady on the
// holders of the tied table, and WaitSums last. Throws chimera::Error naming the first violation.
ProgramFacts verify_program(const Schedule& schedule, const Program& program);

}  // namespace chimera::schedule
