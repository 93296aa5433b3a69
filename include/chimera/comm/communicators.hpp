#pragma once
// The communicators of a run (docs/DESIGN.md §1): the pipeline group (p2p, rank = worker), one
// communicator per model stage over every rank holding a replica of it (so the non-blocking
// allreduces of the stages a worker holds never need a common order), and the tied-embedding
// group (every rank holding stage 0 or the last stage).
#include <mpi.h>

#include <vector>

#include "chimera/comm/topology.hpp"

namespace chimera::comm {

class Communicators {
 public:
  Communicators(const Topology& topo, MPI_Comm world);
  ~Communicators();
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  MPI_Comm world() const { return world_; }
  MPI_Comm pipeline() const { return pipeline_; }
  MPI_Comm stage(int s) const {
    return stage_.at(static_cast<std::size_t>(s));
  }                                        // NULL if not held
  MPI_Comm tied() const { return tied_; }  // MPI_COMM_NULL unless holds_tied()

 private:
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm pipeline_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> stage_;
  MPI_Comm tied_ = MPI_COMM_NULL;
};

}  // namespace chimera::comm
