#pragma once
// The few collectives the checkpoint writer needs, over a communicator that may be "no MPI at
// all" (a serial tool or test before MPI_Init): then every operation is the identity.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chimera::io::detail {

class Collective {
 public:
  explicit Collective(MPI_Comm comm);
  bool parallel() const { return size_ > 1; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  // Rank 0's value on every rank.
  void broadcast(std::int64_t& value) const;
  void broadcast(std::string& text) const;
  // Element-wise sum / minimum over ranks.
  void sum(std::vector<int>& values) const;
  std::int64_t min(std::int64_t value) const;
  std::uint64_t max(std::uint64_t value) const;

  // Every rank learns whether any rank failed, and the message of the lowest failing rank; all
  // then throw the same kind of error (InputError when `input_error`), or return when none did.
  void agree(const std::string& local_failure, bool input_error) const;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace chimera::io::detail
