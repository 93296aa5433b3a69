#include "chimera/comm/node_comm.hpp"

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

NodeComm::NodeComm(MPI_Comm world) {
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

NodeComm::~NodeComm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

}  // namespace chimera::comm
