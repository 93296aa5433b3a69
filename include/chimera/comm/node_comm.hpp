#pragma once
// The ranks of `world` that share this rank's memory (one node), as a communicator that lives for
// one scope. Collective over `world` to make, local to free.
#include <mpi.h>

namespace chimera::comm {

class NodeComm {
 public:
  explicit NodeComm(MPI_Comm world);
  ~NodeComm();
  NodeComm(const NodeComm&) = delete;
  NodeComm& operator=(const NodeComm&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace chimera::comm
