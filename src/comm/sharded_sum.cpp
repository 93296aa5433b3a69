#include "chimera/comm/sharded_sum.hpp"

#include <algorithm>
#include <climits>

#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/error.hpp"

namespace chimera::comm {

ShardLayout::ShardLayout(std::size_t count, int parts, int index)
    : count_(count), parts_(parts), index_(index) {
  CHIMERA_CHECK(parts >= 1 && index >= 0 && index < parts, "shard {} of {} parts", index, parts);
  block_ = (count + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts);
}

ShardLayout ShardLayout::of(std::size_t count, MPI_Comm comm) {
  int size = 1, rank = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return ShardLayout(count, size, rank);
}

std::size_t ShardLayout::begin_of(int part) const {
  return std::min(count_, static_cast<std::size_t>(part) * block_);
}

std::vector<int> ShardLayout::counts() const {
  std::vector<int> out;
  for (int i = 0; i < parts_; ++i) out.push_back(static_cast<int>(begin_of(i + 1) - begin_of(i)));
  return out;
}

std::vector<int> ShardLayout::displacements() const {
  std::vector<int> out;
  for (int i = 0; i < parts_; ++i) out.push_back(static_cast<int>(begin_of(i)));
  return out;
}

ShardedSum::ShardedSum(GradBuffer buffer, MPI_Comm comm, float* weights, float* shard_grads)
    : StageSum(std::move(buffer)),
      comm_(comm),
      layout_(ShardLayout::of(this->buffer().count, comm)),
      counts_(layout_.counts()),
      displacements_(layout_.displacements()),
      weights_(weights),
      shard_grads_(shard_grads) {
  CHIMERA_CHECK(this->buffer().count <= static_cast<std::size_t>(INT_MAX),
                "gradient buffer '{}' has {} floats, more than one MPI call can sum",
                this->buffer().name, this->buffer().count);
  if (shard_grads_ == nullptr) {
    owned_.assign(std::max<std::size_t>(layout_.size(), 1), 0.0F);
    shard_grads_ = owned_.data();
  }
}

void ShardedSum::begin() {
  MPI_CHECK(MPI_Ireduce_scatter(buffer().data, shard_grads_, counts_.data(), MPI_FLOAT, MPI_SUM,
                                comm_, &request_));
}

bool ShardedSum::arrived() {
  int done = 0;
  MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void ShardedSum::begin_gather() {
  MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, weights_, counts_.data(),
                            displacements_.data(), MPI_FLOAT, comm_, &gather_));
}

bool ShardedSum::gather_arrived() {
  int done = 0;
  MPI_CHECK(MPI_Test(&gather_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

std::string ShardedSum::participants() const {
  return ranks_and_hosts(comm_);
}

}  // namespace chimera::comm
