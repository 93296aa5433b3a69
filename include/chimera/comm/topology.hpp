#pragma once
// Rank layout (pure, no MPI): world = W replicas x D workers. A pipeline group occupies D
// consecutive ranks (rank = replica * D + worker), so that with one rank per GPU and several
// GPUs per node a group stays inside a node where possible, and the p2p traffic with it.
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"

namespace chimera::comm {

struct Topology {
  int world_size = 1;
  int rank = 0;
  int replicas = 1;  // W
  int workers = 1;   // D: ranks of one pipeline group
  int stages = 1;    // S: model stages (D, or D*v interleaved)
  int replica = 0;
  int worker = 0;
  std::vector<std::vector<int>> holders;  // [stage] -> workers of a group holding it (sorted)
  std::vector<int> held;                  // model stages this worker holds (sorted)

  // InputError if world_size is not a multiple of the schedule's workers.
  static Topology make(int world_size, int rank, const schedule::Schedule& sched);

  bool holds(int stage) const;
  bool holds_tied() const { return holds(0) || holds(stages - 1); }
  int world_rank(int replica_index, int worker_index) const {
    return replica_index * workers + worker_index;
  }
  // The rank that counts a stage's gradient norm and writes it to checkpoints: replica 0, the
  // lowest worker holding it. Tied embedding: the owner of stage 0.
  int owner_rank(int stage) const { return world_rank(0, holders.at(stage).front()); }
  bool owns(int stage) const { return rank == owner_rank(stage); }

  // A few lines describing the layout, for the start of a run's log.
  std::string describe() const;
};

}  // namespace chimera::comm
