#pragma once
// Making a GPU backend's device groups (NCCL communicators) for the gradient sums. NCCL's
// communicator creation blocks until every member has joined, without a timeout of its own, so a
// rank that fails or stops before joining would leave its peers waiting forever. Here it runs in
// two agreed steps over the world: the ids first (a rank that cannot make one fails every rank
// with its message), then the joins, bounded by runtime.watchdog_s: a join that has not finished
// by then ends the job with one line naming it.
#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chimera/backend/backend.hpp"

namespace chimera::runtime {

// How groups are made: the backend's new_device_group_id and join_device_group, or fakes in tests.
struct DeviceGroupMaker {
  std::function<std::string()> new_id;
  std::function<std::unique_ptr<backend::DeviceGroup>(const std::string& id, int size, int rank)>
      join;
};

// Collective over `world`, every rank passing its own (key, communicator) pairs in one order that
// is consistent across ranks (increasing key). Communicators this rank is not in are
// MPI_COMM_NULL and skipped. `watchdog_s` <= 0: the joins are not bounded.
std::map<int, std::unique_ptr<backend::DeviceGroup>> make_device_groups(
    MPI_Comm world, const std::vector<std::pair<int, MPI_Comm>>& comms,
    const DeviceGroupMaker& maker, double watchdog_s);

}  // namespace chimera::runtime
