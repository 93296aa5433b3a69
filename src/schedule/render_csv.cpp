#include <set>

#include "chimera/schedule/render.hpp"
#include "render_util.hpp"

namespace chimera::schedule {

std::string render_csv(const Schedule& s, const SimResult& r) {
  std::string out = "worker,stages,ops,busy,idle,peak_activations,weight_copies,order\n";
  for (int w = 0; w < s.workers; ++w) {
    std::set<int> stages;
    std::string order;
    for (const Op& op : s.ops[w]) {
      stages.insert(op.stage);
      if (!order.empty()) order += ' ';
      order += op_label(s, op);
    }
    out +=
        fmt::format("{},{},{},{:g},{:g},{:g},{:g},{}\n", w, fmt::join(stages, " "), s.ops[w].size(),
                    r.busy[w], r.idle[w], r.peak_activations[w], r.weight_copies[w], order);
  }
  return out;
}

}  // namespace chimera::schedule
