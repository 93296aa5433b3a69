#include "chimera/comm/communicators.hpp"

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

namespace {
MPI_Comm split(MPI_Comm parent, bool member, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(parent, member ? 0 : MPI_UNDEFINED, key, &out));
  if (out != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
  return out;
}
}  // namespace

Communicators::Communicators(const Topology& topo, MPI_Comm world) {
  MPI_CHECK(MPI_Comm_dup(world, &world_));
  MPI_CHECK(MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_split(world_, topo.replica, topo.worker, &pipeline_));
  MPI_CHECK(MPI_Comm_set_errhandler(pipeline_, MPI_ERRORS_RETURN));
  stage_.reserve(static_cast<std::size_t>(topo.stages));
  for (int s = 0; s < topo.stages; ++s) stage_.push_back(split(world_, topo.holds(s), topo.rank));
  tied_ = split(world_, topo.holds_tied(), topo.rank);
}

Communicators::~Communicators() {
  for (MPI_Comm* c : {&tied_, &pipeline_, &world_}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
  for (auto& c : stage_) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
}

}  // namespace chimera::comm
