#include "chimera/comm/doorbell.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

namespace {
// Each bell on its own cache line, so that ringing one rank does not disturb its neighbours';
// the counts of announced messages follow on lines of their own.
constexpr MPI_Aint kBellBytes = 64;
constexpr std::size_t kCountsOffset = kBellBytes / sizeof(std::uint32_t);

std::atomic_ref<std::uint32_t> counter(std::uint32_t* bell) {
  return std::atomic_ref<std::uint32_t>(*bell);
}
}  // namespace

Doorbells::Doorbells(MPI_Comm comm) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_));
  MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN));
  // The futex is shared between processes (no FUTEX_PRIVATE_FLAG), which works on any mapping
  // the processes share, as MPI's shared windows are.
  const MPI_Aint counts_bytes = static_cast<MPI_Aint>(sizeof(std::uint32_t)) * size;
  const MPI_Aint segment = kBellBytes + (counts_bytes + kBellBytes - 1) / kBellBytes * kBellBytes;
  MPI_CHECK(MPI_Win_allocate_shared(segment, 1, MPI_INFO_NULL, node_, &mine_, &window_));
  for (std::size_t i = 0; i < kCountsOffset + static_cast<std::size_t>(size); ++i) {
    counter(mine_ + i).store(0);
  }

  MPI_Group comm_group = MPI_GROUP_NULL;
  MPI_Group node_group = MPI_GROUP_NULL;
  MPI_CHECK(MPI_Comm_group(comm, &comm_group));
  MPI_CHECK(MPI_Comm_group(node_, &node_group));
  std::vector<int> ranks(static_cast<std::size_t>(size));
  std::vector<int> node_ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  MPI_CHECK(
      MPI_Group_translate_ranks(comm_group, size, ranks.data(), node_group, node_ranks.data()));
  MPI_Group_free(&comm_group);
  MPI_Group_free(&node_group);

  bell_.assign(static_cast<std::size_t>(size), nullptr);
  for (int r = 0; r < size; ++r) {
    const int n = node_ranks[static_cast<std::size_t>(r)];
    if (n == MPI_UNDEFINED) continue;
    MPI_Aint bytes = 0;
    int unit = 0;
    void* base = nullptr;
    MPI_CHECK(MPI_Win_shared_query(window_, n, &bytes, &unit, &base));
    bell_[static_cast<std::size_t>(r)] = static_cast<std::uint32_t*>(base);
  }
  // Every counter is initialised before anyone rings it.
  MPI_CHECK(MPI_Barrier(node_));
}

Doorbells::~Doorbells() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

bool Doorbells::shared_with(int peer) const {
  return bell_.at(static_cast<std::size_t>(peer)) != nullptr;
}

void Doorbells::ring(int peer) const {
  std::uint32_t* bell = bell_.at(static_cast<std::size_t>(peer));
  if (bell == nullptr) return;
  counter(bell).fetch_add(1);
  syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Doorbells::announce(int peer) const {
  std::uint32_t* bell = bell_.at(static_cast<std::size_t>(peer));
  if (bell == nullptr) return;
  counter(bell + kCountsOffset + rank_).fetch_add(1);
  ring(peer);
}

std::uint32_t Doorbells::announced_by(int peer) const {
  if (bell_.at(static_cast<std::size_t>(peer)) == nullptr) return 0;
  return counter(mine_ + kCountsOffset + peer).load();
}

std::uint32_t Doorbells::seen() const {
  return counter(mine_).load();
}

void Doorbells::sleep(std::uint32_t seen, double max_us) const {
  const timespec timeout = to_timespec(max_us * 1e-6);
  // Returns at once if the counter already moved on, at a ring, at the timeout or at a signal:
  // every case is followed by another test of what the caller waits for.
  syscall(SYS_futex, mine_, FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

}  // namespace chimera::comm
