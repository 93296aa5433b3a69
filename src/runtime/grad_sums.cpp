#include "grad_sums.hpp"

#include <climits>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"
#include "device_group_setup.hpp"

namespace chimera::runtime {

namespace {

// MPI_Iallreduce on a page-locked host copy: the copy down when the gradient is ready (the
// backend's work on it has finished by then: ModelCompute waits for every op), the copy back
// when the sum has arrived.
class HostStagedSum final : public comm::AsyncSum {
 public:
  HostStagedSum(backend::Backend& backend, float* data, std::size_t count, MPI_Comm comm)
      : backend_(backend),
        data_(data),
        count_(count),
        comm_(comm),
        host_(static_cast<float*>(backend.allocate_host(count * sizeof(float)))) {
    CHIMERA_CHECK(count <= static_cast<std::size_t>(INT_MAX),
                  "a gradient buffer of {} floats is more than one MPI call can sum", count);
  }
  ~HostStagedSum() override { backend_.deallocate_host(host_); }
  HostStagedSum(const HostStagedSum&) = delete;
  HostStagedSum& operator=(const HostStagedSum&) = delete;

  void start() override {
    backend_.copy_to_host(host_, data_, count_ * sizeof(float));
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host_, static_cast<int>(count_), MPI_FLOAT, MPI_SUM,
                             comm_, &request_));
  }
  bool test() override {
    int done = 0;
    MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    if (done != 0) backend_.copy_from_host(data_, host_, count_ * sizeof(float));
    return done != 0;
  }

 private:
  backend::Backend& backend_;
  float* data_;
  std::size_t count_;
  MPI_Comm comm_;
  float* host_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// NCCL on the backend's collective stream, ordered after the backward that made the gradient.
class DeviceSum final : public comm::AsyncSum {
 public:
  DeviceSum(backend::DeviceGroup& group, float* data, std::size_t count)
      : group_(group), data_(data), count_(count) {}
  void start() override { ticket_ = group_.start_sum(data_, count_); }
  bool test() override { return group_.finished(ticket_); }

 private:
  backend::DeviceGroup& group_;
  float* data_;
  std::size_t count_;
  std::uint64_t ticket_ = 0;
};

}  // namespace

GradSums::GradSums(backend::Backend& backend, GradSumPath path, const comm::Communicators& comms,
                   const comm::Topology& topo, double watchdog_s)
    : backend_(backend), path_(path) {
  if (path_ != GradSumPath::Nccl) return;
  std::vector<std::pair<int, MPI_Comm>> group_comms;
  for (const int s : topo.held) group_comms.emplace_back(s, comms.stage(s));  // topo.held is sorted
  group_comms.emplace_back(-1, comms.tied());
  groups_ = make_device_groups(comms.world(), group_comms,
                               {[&] { return backend_.new_device_group_id(); },
                                [&](const std::string& id, int size, int rank) {
                                  return backend_.join_device_group(id, size, rank);
                                }},
                               watchdog_s);
}

GradSums::~GradSums() = default;

std::unique_ptr<comm::AsyncSum> GradSums::make(const comm::GradBuffer& g, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  switch (path_) {
    case GradSumPath::Mpi:
      return nullptr;
    case GradSumPath::HostStagedMpi:
      return std::make_unique<HostStagedSum>(backend_, g.data, g.count, comm);
    case GradSumPath::Nccl:
      return std::make_unique<DeviceSum>(*groups_.at(g.stage), g.data, g.count);
  }
  return nullptr;
}

}  // namespace chimera::runtime
