#pragma once
// Deadlock freedom of a lowered program when a send completes only once its receive is posted
// (verify.hpp, Semantics::Rendezvous).
#include <string>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule::detail {

// Empty when `program` (the lowering of `schedule`) runs to the end with rendezvous sends;
// otherwise a shortest cyclic wait, one line, op by op.
std::string rendezvous_deadlock(const Schedule& schedule, const Program& program);

}  // namespace chimera::schedule::detail
