#include "chimera/comm/core_sharing.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/node_comm.hpp"

namespace chimera::comm {

CoreSharing core_sharing(MPI_Comm world) {
  const NodeComm node(world);
  CoreSharing s;
  s.ranks_on_node = node.size();
  // A launcher that binds each rank to one core gives each a one-CPU mask: only the union of
  // the node's masks says how many cores its ranks share.
  constexpr int kWords = CPU_SETSIZE / 64;
  std::array<std::uint64_t, kWords> mask{};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) mask[cpu / 64] |= std::uint64_t{1} << (cpu % 64);
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mask.data(), kWords, MPI_UINT64_T, MPI_BOR, node.get()));
  int cores = 0;
  for (const std::uint64_t word : mask) cores += std::popcount(word);
  s.cores = cores > 0 ? cores : 1;
  return s;
}

std::optional<double> parse_schedstat(std::string_view text) {
  const char* p = text.data();
  const char* end = text.data() + text.size();
  std::uint64_t fields[2] = {};
  for (std::uint64_t& field : fields) {
    while (p < end && *p == ' ') ++p;
    const auto [next, ec] = std::from_chars(p, end, field);
    if (ec != std::errc() || next == p) return std::nullopt;
    p = next;
  }
  return static_cast<double>(fields[1]) * 1e-9;
}

RunQueueClock::RunQueueClock() : fd_(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}

RunQueueClock::~RunQueueClock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<double> RunQueueClock::seconds() const {
  if (fd_ < 0) return std::nullopt;
  char text[128];
  const ssize_t n = ::pread(fd_, text, sizeof(text) - 1, 0);
  if (n <= 0) return std::nullopt;
  return parse_schedstat(std::string_view(text, static_cast<std::size_t>(n)));
}

}  // namespace chimera::comm
