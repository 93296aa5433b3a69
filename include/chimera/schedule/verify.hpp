#pragma once
// The verifier (docs/DESIGN.md §3): a schedule is run only if it is complete and cannot deadlock.
//   completeness  every micro-batch runs F and B (or I and W) at every stage of its pipe, exactly
//                 once, on the worker placement names; nothing else is scheduled.
//   deadlock      program order plus data dependencies form an acyclic graph. Sends are
//                 non-blocking and receives are posted before they are waited on (see lower.hpp),
//                 so an acyclic graph is a run that cannot hang.
#include <string>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

struct VerifyResult {
  bool ok = true;
  std::string problem;  // the first problem found, one line; empty when ok
};

// Non-throwing form, for tests and tools that want to report rather than stop.
VerifyResult check(const Schedule& schedule);

// Throws chimera::Error describing the first problem.
void verify(const Schedule& schedule);

}  // namespace chimera::schedule
