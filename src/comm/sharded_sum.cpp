#include "chimera/comm/sharded_sum.hpp"

#include <algorithm>
#include <climits>

#include "chimera/comm/peer_probe.hpp"
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

ShardRing::ShardRing(const std::string& name, std::size_t count, MPI_Comm comm,
                     std::size_t piece_floats)
    : comm_(comm),
      layout_(ShardLayout::of(count, comm)),
      counts_(layout_.counts()),
      displacements_(layout_.displacements()),
      piece_floats_(piece_floats) {
  CHIMERA_CHECK(count <= static_cast<std::size_t>(INT_MAX),
                "gradient buffer '{}' has {} floats, more than one MPI call can sum", name, count);
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  const std::size_t largest = layout_.begin_of(1);  // shard 0's
  pieces_ =
      static_cast<int>(std::max<std::size_t>(1, (largest + piece_floats_ - 1) / piece_floats_));
  incoming_.assign(std::max<std::size_t>(1, std::min(largest, piece_floats_)), 0.0F);
}

// Step t of the ring: rank r sends its partial sum of shard (r - t - 1) mod P to rank r + 1 and
// adds rank r - 1's partial sum of shard (r - t - 2) mod P; after P - 1 steps it holds the whole
// sum of shard r.
int ShardRing::send_part() const {
  const int p = layout_.parts();
  return ((rank_ - step_ - 1) % p + p) % p;
}

int ShardRing::recv_part() const {
  const int p = layout_.parts();
  return ((rank_ - step_ - 2) % p + p) % p;
}

std::pair<std::size_t, int> ShardRing::piece(int part) const {
  const auto size = static_cast<std::size_t>(counts_[static_cast<std::size_t>(part)]);
  const std::size_t lo = std::min(size, static_cast<std::size_t>(piece_) * piece_floats_);
  const std::size_t hi = std::min(size, lo + piece_floats_);
  return {static_cast<std::size_t>(displacements_[static_cast<std::size_t>(part)]) + lo,
          static_cast<int>(hi - lo)};
}

void ShardRing::post_step() {
  const int p = layout_.parts();
  const int next = (rank_ + 1) % p, previous = (rank_ - 1 + p) % p;
  constexpr int kTag = 29;  // the communicator carries no other point-to-point message
  const auto [send_at, send_count] = piece(send_part());
  MPI_CHECK(MPI_Isend(data_ + send_at, send_count, MPI_FLOAT, next, kTag, comm_, &ring_[0]));
  const int recv_count = piece(recv_part()).second;
  MPI_CHECK(MPI_Irecv(incoming_.data(), recv_count, MPI_FLOAT, previous, kTag, comm_, &ring_[1]));
}

void ShardRing::start_sum(float* data) {
  data_ = data;
  step_ = 0;
  piece_ = 0;
  if (layout_.parts() > 1) post_step();
}

bool ShardRing::test_sum() {
  const int p = layout_.parts();
  while (step_ < p - 1) {
    int done = 0;
    MPI_CHECK(MPI_Testall(2, ring_, &done, MPI_STATUSES_IGNORE));
    if (done == 0) return false;
    const auto [at, count] = piece(recv_part());
    float* part = data_ + at;
    for (int i = 0; i < count; ++i) part[i] += incoming_[static_cast<std::size_t>(i)];
    if (++piece_ == pieces_) {
      piece_ = 0;
      ++step_;
    }
    if (step_ < p - 1) post_step();
  }
  return true;
}

void ShardRing::start_gather(float* data) {
  MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts_.data(),
                            displacements_.data(), MPI_FLOAT, comm_, &gather_));
}

bool ShardRing::test_gather() {
  int done = 0;
  MPI_CHECK(MPI_Test(&gather_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

ShardedSum::ShardedSum(GradBuffer buffer, MPI_Comm comm, float* weights, std::size_t piece_floats)
    : StageSum(std::move(buffer)),
      ring_(this->buffer().name, this->buffer().count, comm, piece_floats),
      weights_(weights) {}

std::string ShardedSum::participants() const {
  return ranks_and_hosts(ring_.comm());
}

std::string ShardedSum::silent_participants() const {
  return describe_silent_peers(ring_.comm());
}

}  // namespace chimera::comm
