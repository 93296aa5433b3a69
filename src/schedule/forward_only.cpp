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

}  // namespace chimera::schedule
