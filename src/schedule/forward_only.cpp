#include "chimera/schedule/generators.hpp"

namespace chimera::schedule {

Schedule forward_only(const Schedule& training) {
  Schedule s = training;
  s.forward_only = true;
  for (auto& ops : s.ops) {
    std::erase_if(ops, [](const Op& op) { return op.kind != OpKind::F; });
  }
  return s;
}

Schedule forward_one(const Schedule& training) {
  Schedule s;
  s.scheme = training.scheme;
  s.variant = training.variant;
  s.workers = training.workers;
  s.stages = training.stages;
  s.schedule_micro_batches = 1;
  s.forward_only = true;
  s.placement = {training.placement.at(0)};
  s.pipe_of = {0};
  s.ops.resize(static_cast<std::size_t>(s.workers));
  for (int stage = 0; stage < s.stages; ++stage) {
    const int w = s.placement[0][static_cast<std::size_t>(stage)];
    s.ops[static_cast<std::size_t>(w)].push_back(Op{OpKind::F, 0, stage, {0}});
  }
  return s;
}

}  // namespace chimera::schedule
