#include "grad_sums.hpp"

#include <climits>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/sharded_sum.hpp"
#include "chimera/core/error.hpp"
#include "device_group_setup.hpp"
#include "staged_sharded_sum.hpp"

namespace chimera::runtime {

namespace {

// MPI_Iallreduce on a page-locked host copy: the copy down when the gradient is ready (the
// backend's work on it has finished by then: RealStageCompute waits for every op), the copy back
// when the sum has arrived.
class HostStagedSum final : public comm::StageSum {
 public:
  HostStagedSum(backend::Backend& backend, const comm::GradBuffer& g, MPI_Comm comm)
      : StageSum(g),
        backend_(backend),
        comm_(comm),
        host_(static_cast<float*>(backend.allocate_host(bytes()))) {
    CHIMERA_CHECK(g.count <= static_cast<std::size_t>(INT_MAX),
                  "a gradient buffer of {} floats is more than one MPI call can sum", g.count);
  }
  ~HostStagedSum() override { backend_.deallocate_host(host_); }
  HostStagedSum(const HostStagedSum&) = delete;
  HostStagedSum& operator=(const HostStagedSum&) = delete;

 private:
  std::size_t bytes() const { return buffer().count * sizeof(float); }
  void begin() override {
    backend_.copy_to_host(host_, buffer().data, bytes());
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host_, static_cast<int>(buffer().count), MPI_FLOAT,
                             MPI_SUM, comm_, &request_));
  }
  bool arrived() override {
    int done = 0;
    MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    if (done != 0) backend_.copy_from_host(buffer().data, host_, bytes());
    return done != 0;
  }

  backend::Backend& backend_;
  MPI_Comm comm_;
  float* host_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// NCCL on the backend's collective stream, ordered after the backward that made the gradient.
class DeviceSum final : public comm::StageSum {
 public:
  DeviceSum(backend::DeviceGroup& group, const comm::GradBuffer& g) : StageSum(g), group_(group) {}

 private:
  void begin() override { ticket_ = group_.start_sum(buffer().data, buffer().count); }
  bool arrived() override { return group_.finished(ticket_); }

  backend::DeviceGroup& group_;
  std::uint64_t ticket_ = 0;
};

// The sharded optimizer's halves on the device group, with DeviceSum's stream and tickets.
class DeviceShardedSum final : public comm::StageSum {
 public:
  DeviceShardedSum(backend::DeviceGroup& group, const comm::GradBuffer& g, MPI_Comm comm,
                   float* weights)
      : StageSum(g), group_(group), weights_(weights) {
    const auto layout = comm::ShardLayout::of(g.count, comm);  // NCCL ranks = the comm's ranks
    for (int i = 0; i <= layout.parts(); ++i) bounds_.push_back(layout.begin_of(i));
  }

 private:
  void begin() override { ticket_ = group_.start_reduce_scatter(buffer().data, bounds_); }
  bool arrived() override { return group_.finished(ticket_); }
  bool gathers() const override { return true; }
  void begin_gather() override { ticket_ = group_.start_all_gather(weights_, bounds_); }
  bool gather_arrived() override { return group_.finished(ticket_); }

  backend::DeviceGroup& group_;
  float* weights_;
  std::vector<std::size_t> bounds_;  // shard i: [bounds_[i], bounds_[i + 1])
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

std::unique_ptr<comm::StageSum> GradSums::make(const comm::GradBuffer& g, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  switch (path_) {
    case GradSumPath::Mpi:
      return nullptr;
    case GradSumPath::HostStagedMpi:
      return std::make_unique<HostStagedSum>(backend_, g, comm);
    case GradSumPath::Nccl:
      return std::make_unique<DeviceSum>(*groups_.at(g.stage), g);
  }
  return nullptr;
}

std::unique_ptr<comm::StageSum> GradSums::make_sharded(const comm::GradBuffer& g, MPI_Comm comm,
                                                       float* weights) {
  if (comm == MPI_COMM_NULL) return nullptr;
  if (path_ == GradSumPath::Nccl) {
    return std::make_unique<DeviceShardedSum>(*groups_.at(g.stage), g, comm, weights);
  }
  return std::make_unique<StagedShardedSum>(backend_, g, comm, weights);
}

}  // namespace chimera::runtime
