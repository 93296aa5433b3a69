#include "chimera/comm/rank_hosts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

namespace {
std::vector<std::string>& table() {
  static std::vector<std::string> hosts;
  return hosts;
}
bool& several_hosts() {
  static bool several = false;
  return several;
}
}  // namespace

std::vector<std::string> gather_host_names(MPI_Comm world) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(world, &size));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> all(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                          MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world));
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    const char* p = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts.emplace_back(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
  }
  return hosts;
}

void set_rank_hosts(std::vector<std::string> hosts) {
  several_hosts() =
      std::adjacent_find(hosts.begin(), hosts.end(), std::not_equal_to<>()) != hosts.end();
  table() = std::move(hosts);
}

std::string on_host(int world_rank) {
  const auto& hosts = table();
  if (!several_hosts() || world_rank < 0 || static_cast<std::size_t>(world_rank) >= hosts.size())
    return "";
  return fmt::format(" on host {}", hosts[static_cast<std::size_t>(world_rank)]);
}

std::string job_hosts() {
  if (!several_hosts()) return "";
  std::vector<std::string> distinct;
  for (const auto& h : table()) {
    if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
  }
  return fmt::format(" (hosts {})", fmt::join(distinct, ", "));
}

}  // namespace chimera::comm
