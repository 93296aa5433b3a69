#pragma once
// A property of a schedule and its lowered program that decides whether its gradient sums may run
// on NCCL. NCCL runs the sums of one rank one after another on one stream, so a rank blocks on a
// sum until every member of its group has started it. That cannot deadlock when the order in
// which the workers start their sums (program order of the GradReady and TiedGradReady
// instructions) is consistent with one global order of the sums.
#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

bool sum_order_consistent(const Schedule& sched, const Program& program);

}  // namespace chimera::schedule
