#include "device_group_setup.hpp"

#include <fmt/format.h>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/comm/mpi.hpp"

namespace chimera::runtime {

std::map<int, std::unique_ptr<backend::DeviceGroup>> make_device_groups(
    MPI_Comm world, const std::vector<std::pair<int, MPI_Comm>>& comms,
    const DeviceGroupMaker& maker, double watchdog_s) {
  std::vector<int> ranks(comms.size(), -1), sizes(comms.size(), 0);
  std::vector<std::string> ids(comms.size());
  // 1. Rank 0 of each communicator makes its id; a failure there fails every rank.
  comm::all_or_none(world, [&] {
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (comms[i].second == MPI_COMM_NULL) continue;
      MPI_CHECK(MPI_Comm_rank(comms[i].second, &ranks[i]));
      MPI_CHECK(MPI_Comm_size(comms[i].second, &sizes[i]));
      if (ranks[i] == 0) ids[i] = maker.new_id();
    }
  });
  for (std::size_t i = 0; i < comms.size(); ++i) {
    if (comms[i].second == MPI_COMM_NULL) continue;
    auto bytes = static_cast<int>(ids[i].size());
    MPI_CHECK(MPI_Bcast(&bytes, 1, MPI_INT, 0, comms[i].second));
    ids[i].resize(static_cast<std::size_t>(bytes));
    MPI_CHECK(MPI_Bcast(ids[i].data(), bytes, MPI_CHAR, 0, comms[i].second));
  }
  // 2. The joins, in the same order on every rank. A join that fails with an error fails every
  // rank through the agreement; one that never returns (a peer failed or stopped before joining)
  // is ended by the deadline.
  std::map<int, std::unique_ptr<backend::DeviceGroup>> groups;
  const comm::Deadline deadline(watchdog_s, [watchdog_s] {
    return fmt::format(
        "the device groups (NCCL communicators) for the gradient sums were not set up within "
        "{:g} s (runtime.watchdog_s): a rank failed or stopped while joining; ending the job",
        watchdog_s);
  });
  comm::all_or_none(world, [&] {
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (comms[i].second == MPI_COMM_NULL) continue;
      groups[comms[i].first] = maker.join(ids[i], sizes[i], ranks[i]);
    }
  });
  return groups;
}

}  // namespace chimera::runtime
