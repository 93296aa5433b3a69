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

namespace {
// The distinct hosts of these world ranks, in rank order.
std::vector<std::string> hosts_of(const std::vector<int>& world_ranks) {
  std::vector<std::string> distinct;
  for (const int r : world_ranks) {
    if (r < 0 || static_cast<std::size_t>(r) >= table().size()) continue;
    const std::string& h = table()[static_cast<std::size_t>(r)];
    if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
  }
  return distinct;
}
}  // namespace

std::vector<int> world_ranks_of(MPI_Comm comm) {
  std::vector<int> out;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  if (comm == MPI_COMM_NULL || MPI_Comm_group(comm, &group) != MPI_SUCCESS) return out;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int size = 0;
  MPI_Group_size(group, &size);
  std::vector<int> ranks(static_cast<std::size_t>(size));
  out.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

std::string hosts_of_ranks(const std::vector<int>& world_ranks) {
  if (!several_hosts()) return "";
  return fmt::format(" (hosts {})", fmt::join(hosts_of(world_ranks), ", "));
}

std::string ranks_and_hosts(MPI_Comm comm) {
  if (!several_hosts() || comm == MPI_COMM_NULL) return "";
  const std::vector<int> world_ranks = world_ranks_of(comm);
  return fmt::format(" over ranks {}{}", fmt::join(world_ranks, ", "), hosts_of_ranks(world_ranks));
}

std::string job_hosts() {
  if (!several_hosts()) return "";
  std::vector<int> all(table().size());
  for (std::size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
  return hosts_of_ranks(all);
}

}  // namespace chimera::comm
