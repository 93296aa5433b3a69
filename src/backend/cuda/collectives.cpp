// Device collectives of the CUDA backend: NCCL groups whose sums run on the backend's collective
// stream, each ordered after the compute stream's work by an event, and completed in order.
#include "chimera/core/error.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#ifdef CHIMERA_HAVE_NCCL
#include <nccl.h>

#include <cstring>
#endif

namespace chimera::backend::cuda {

std::uint64_t CudaBackend::run_collective(const std::function<void(cudaStream_t)>& issue) {
  if (collective_stream_ == nullptr) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&collective_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  }
  // The stream waits for the compute stream's state at this moment; the event may be recorded
  // again at once for the next collective.
  CUDA_CHECK(cudaEventRecord(compute_ready_, stream_));
  CUDA_CHECK(cudaStreamWaitEvent(collective_stream_, compute_ready_, 0));
  issue(collective_stream_);
  cudaEvent_t done = nullptr;
  if (free_events_.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = free_events_.back();
    free_events_.pop_back();
  }
  CUDA_CHECK(cudaEventRecord(done, collective_stream_));
  pending_collectives_.push_back({++last_ticket_, done});
  return last_ticket_;
}

bool CudaBackend::collective_finished(std::uint64_t ticket) {
  while (!pending_collectives_.empty() && ticket > finished_through_) {
    const PendingCollective front = pending_collectives_.front();
    const cudaError_t state = cudaEventQuery(front.done);
    if (state == cudaErrorNotReady) break;
    CUDA_CHECK(state);
    finished_through_ = front.ticket;
    free_events_.push_back(front.done);
    pending_collectives_.pop_front();
  }
  return ticket <= finished_through_;
}

#ifdef CHIMERA_HAVE_NCCL

namespace {

[[noreturn]] void fail_nccl(const char* file, int line, const char* call, ncclResult_t code) {
  throw Error(fmt::format("{}{}:{}: {} failed: {}", rank_prefix(), file, line, call,
                          ncclGetErrorString(code)));
}

#define NCCL_CHECK(call)                                    \
  do {                                                      \
    const ncclResult_t nccl_check_rc_ = (call);             \
    if (nccl_check_rc_ != ncclSuccess) [[unlikely]] {       \
      fail_nccl(__FILE__, __LINE__, #call, nccl_check_rc_); \
    }                                                       \
  } while (0)

// One NCCL communicator. Must be destroyed before the backend that made it.
class NcclGroup final : public DeviceGroup {
 public:
  NcclGroup(CudaBackend& backend, ncclComm_t comm) : backend_(backend), comm_(comm) {}
  ~NcclGroup() override { (void)ncclCommDestroy(comm_); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  std::uint64_t start_sum(float* data, std::size_t count) override {
    return backend_.run_collective([&](cudaStream_t stream) {
      NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream));
    });
  }

  // NCCL's ncclReduceScatter and ncclAllGather need equal shards (a buffer of size x block),
  // while the sharded buffers are the model's own, sized exactly, with a short last shard. So
  // each shard is one ncclReduce to its rank (then one ncclBroadcast from it), all of them in one
  // NCCL group, which NCCL runs as one launch: no padding of the model's buffers and no scratch
  // buffer, about the bytes of a reduce-scatter (all-gather) per rank.
  std::uint64_t start_reduce_scatter(float* data, const std::vector<std::size_t>& bounds) override {
    return per_shard(bounds,
                     [&](std::size_t begin, std::size_t count, int root, cudaStream_t stream) {
                       NCCL_CHECK(ncclReduce(data + begin, data + begin, count, ncclFloat32,
                                             ncclSum, root, comm_, stream));
                     });
  }

  std::uint64_t start_all_gather(float* data, const std::vector<std::size_t>& bounds) override {
    return per_shard(
        bounds, [&](std::size_t begin, std::size_t count, int root, cudaStream_t stream) {
          NCCL_CHECK(
              ncclBroadcast(data + begin, data + begin, count, ncclFloat32, root, comm_, stream));
        });
  }

  bool finished(std::uint64_t ticket) override {
    if (backend_.collective_finished(ticket)) return true;
    // A failed peer leaves the sum waiting forever; NCCL reports it here.
    ncclResult_t async_error = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_error));
    NCCL_CHECK(async_error);
    return false;
  }

 private:
  // One call of `issue` per nonempty shard (the same on every rank: bounds are), grouped.
  template <typename Issue>
  std::uint64_t per_shard(const std::vector<std::size_t>& bounds, const Issue& issue) {
    int size = 0;
    NCCL_CHECK(ncclCommCount(comm_, &size));
    CHIMERA_CHECK(bounds.size() == static_cast<std::size_t>(size) + 1,
                  "{} shard bounds for a group of {} ranks", bounds.size(), size);
    return backend_.run_collective([&](cudaStream_t stream) {
      NCCL_CHECK(ncclGroupStart());
      for (int root = 0; root < size; ++root) {
        const auto i = static_cast<std::size_t>(root);
        if (bounds[i + 1] > bounds[i]) issue(bounds[i], bounds[i + 1] - bounds[i], root, stream);
      }
      NCCL_CHECK(ncclGroupEnd());
    });
  }

  CudaBackend& backend_;
  ncclComm_t comm_;
};

}  // namespace

bool CudaBackend::has_device_groups() const {
  return true;
}

std::string CudaBackend::new_device_group_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof id.internal);
}

std::unique_ptr<DeviceGroup> CudaBackend::join_device_group(const std::string& id, int size,
                                                            int rank) {
  ncclUniqueId unique{};
  CHIMERA_CHECK(id.size() == sizeof unique.internal, "NCCL group id of {} bytes, expected {}",
                id.size(), sizeof unique.internal);
  std::memcpy(unique.internal, id.data(), id.size());
  CUDA_CHECK(cudaSetDevice(device_));
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, size, unique, rank));
  return std::make_unique<NcclGroup>(*this, comm);
}

#else  // built without NCCL: gradients are summed through MPI

bool CudaBackend::has_device_groups() const {
  return false;
}

std::string CudaBackend::new_device_group_id() {
  return {};
}

std::unique_ptr<DeviceGroup> CudaBackend::join_device_group(const std::string& /*id*/, int /*size*/,
                                                            int /*rank*/) {
  throw Error(
      fmt::format("{}this build has no NCCL: device groups are not available", rank_prefix()));
}

#endif

}  // namespace chimera::backend::cuda
