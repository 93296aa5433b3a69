#include "chimera/comm/topology.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "chimera/core/error.hpp"

namespace chimera::comm {

Topology Topology::make(int world_size, int rank, const schedule::Schedule& sched) {
  CHIMERA_REQUIRE(sched.workers >= 1, "a schedule needs at least one worker");
  CHIMERA_REQUIRE(world_size % sched.workers == 0,
                  "world size {} is not a multiple of the pipeline group size D={} (scheme {}): "
                  "launch W*{} ranks for W data-parallel replicas",
                  world_size, sched.workers, sched.scheme, sched.workers);
  CHIMERA_CHECK(rank >= 0 && rank < world_size, "rank {} outside world of {}", rank, world_size);
  Topology t;
  t.world_size = world_size;
  t.rank = rank;
  t.workers = sched.workers;
  t.replicas = world_size / sched.workers;
  t.stages = sched.stages;
  t.replica = rank / sched.workers;
  t.worker = rank % sched.workers;
  t.holders.assign(static_cast<std::size_t>(sched.stages), {});
  for (const auto& pipe : sched.placement) {
    for (int s = 0; s < sched.stages; ++s) {
      auto& h = t.holders[static_cast<std::size_t>(s)];
      const int w = pipe.at(static_cast<std::size_t>(s));
      if (std::find(h.begin(), h.end(), w) == h.end()) h.push_back(w);
    }
  }
  for (int s = 0; s < sched.stages; ++s) {
    auto& h = t.holders[static_cast<std::size_t>(s)];
    std::sort(h.begin(), h.end());
    if (std::find(h.begin(), h.end(), t.worker) != h.end()) t.held.push_back(s);
  }
  return t;
}

bool Topology::holds(int stage) const {
  return std::binary_search(held.begin(), held.end(), stage);
}

std::string Topology::describe() const {
  std::string out = fmt::format(
      "layout: {} ranks = W {} replicas x D {} workers (rank = replica*{} + worker), {} model "
      "stages\n",
      world_size, replicas, workers, workers, stages);
  for (int s = 0; s < stages; ++s) {
    out += fmt::format(
        "  stage {:>3}: workers {} of every replica ({} ranks sum its gradient)\n", s,
        holders[static_cast<std::size_t>(s)],
        holders[static_cast<std::size_t>(s)].size() * static_cast<std::size_t>(replicas));
  }
  return out;
}

}  // namespace chimera::comm
