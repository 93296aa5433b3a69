// Whether the order in which a schedule's workers start their gradient sums is consistent with one
// global order, as NCCL's one stream per rank needs (sum_order.hpp).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/sum_order.hpp"

namespace chimera::schedule {
namespace {

bool consistent(std::vector<int> order0, std::vector<int> order1) {
  Schedule s;
  s.workers = 2;
  s.stages = 2;
  s.placement = {{0, 1}, {1, 0}};
  Program p;
  for (const auto& order : {order0, order1}) {
    p.workers.emplace_back();
    for (const int stage : order) {
      Instr i;
      i.kind = InstrKind::GradReady;
      i.stage = stage;
      p.workers.back().push_back(i);
    }
  }
  return sum_order_consistent(s, p);
}

TEST(SumOrder, OppositeOrdersOnTwoWorkersAreACycle) {
  EXPECT_TRUE(consistent({0, 1}, {0, 1}));
  EXPECT_FALSE(consistent({0, 1}, {1, 0}));
}

// Chimera's two pipelines finish the stages of a worker in the same order on both of its
// workers, so its sums can use NCCL; GEMS's alternating pipelines start them in opposite orders
// on the two workers that share a pair of stages, so it falls back to MPI (no deadlock).
TEST(SumOrder, EverySchemeAtFourStages) {
  const std::vector<std::pair<std::string, bool>> expected = {
      {"gpipe", true},   {"1f1b", true},      {"gems", false}, {"interleaved", true},
      {"chimera", true}, {"zb-h1", true},     {"zb-v", true},  {"dualpipev", true},
      {"bitpipe", true}, {"bitpipe-zb", true}};
  for (const auto& [scheme, consistent_order] : expected) {
    ScheduleRequest r;
    r.scheme = scheme;
    r.stages = 4;
    r.micro_batches = 8;
    const auto sched = make_schedule(r);
    EXPECT_EQ(sum_order_consistent(sched, lower(sched)), consistent_order) << scheme;
  }
}

}  // namespace
}  // namespace chimera::schedule
