// CudaBackend: device selection, streams and cuBLAS, memory and copies, scratch, device facts.
#include "cuda_backend.hpp"

#include <algorithm>

#include "chimera/comm/local_rank.hpp"
#include "chimera/core/error.hpp"
#include "cuda_check.hpp"
#ifdef CHIMERA_HAVE_NCCL
#include <nccl.h>
#endif

namespace chimera::backend::cuda {

namespace {

// cuBLAS's recommended workspace on Hopper; given to it up front so that it never allocates (or
// frees, which synchronises the device) while a run is under way.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
constexpr std::size_t kScratchGranule = std::size_t{1} << 20;

double mib(std::size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

cublasComputeType_t compute_type_for(const std::string& precision, const DeviceInfo& device) {
  CHIMERA_REQUIRE(precision == "fp32" || precision == "tf32" || precision == "bf16",
                  "runtime.precision = '{}' on the CUDA backend: expected fp32, tf32, bf16 or "
                  "auto (bf16-emulated is the CPU backend's)",
                  precision);
  if (precision == "fp32") return CUBLAS_COMPUTE_32F;
  CHIMERA_REQUIRE(device.major >= 8,
                  "runtime.precision = '{}' needs tensor cores of compute capability 8.0 or newer "
                  "(Ampere); {} has {}.{}: use runtime.precision = 'fp32'",
                  precision, device.name, device.major, device.minor);
  return precision == "tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_FAST_16BF;
}

DeviceInfo query_device(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = prop.totalGlobalMem;
  CUDA_CHECK(cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, device));
  char bus_id[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
  info.pci_bus_id = bus_id;
  return info;
}

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& options) : precision_(options.precision) {
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();  // a failed query leaves no error behind for later calls
  CHIMERA_REQUIRE(found == cudaSuccess && count > 0,
                  "runtime.backend = 'cuda': no CUDA device is visible to this process ({}); "
                  "check the driver and CUDA_VISIBLE_DEVICES, or use runtime.backend = 'cpu'",
                  found == cudaSuccess ? "0 devices"
                  : found == cudaErrorInsufficientDriver
                      ? "no NVIDIA driver (libcuda.so.1), or one older than this CUDA runtime"
                      : cudaGetErrorString(found));
  // Without a rank from the caller (a tool without MPI), the launcher's word, else device 0.
  const int local_rank = options.local_rank >= 0 ? options.local_rank : [] {
    const auto launcher = comm::launcher_local_rank(comm::process_env);
    return launcher ? launcher->rank : 0;
  }();
  device_ = local_rank % count;
  CUDA_CHECK(cudaSetDevice(device_));
  info_ = query_device(device_);
  // auto: bf16 on tensor cores where the device has them (Ampere and newer).
  if (precision_ == "auto") precision_ = info_.major >= 8 ? "bf16" : "fp32";
  compute_type_ = compute_type_for(precision_, info_);

  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  cublas_workspace_ = allocate(kCublasWorkspaceBytes);
  CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
}

CudaBackend::~CudaBackend() {
  // Errors cannot be reported from a destructor; a failing teardown changes no result.
  (void)cudaSetDevice(device_);
  (void)cudaStreamSynchronize(stream_);
  if (collective_stream_ != nullptr) (void)cudaStreamSynchronize(collective_stream_);
  for (const auto& pending : pending_collectives_) (void)cudaEventDestroy(pending.done);
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  if (compute_ready_ != nullptr) (void)cudaEventDestroy(compute_ready_);
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  for (void* p : scratch_) (void)cudaFree(p);
  for (void* p : pinned_scratch_) (void)cudaFreeHost(p);
  if (cublas_workspace_ != nullptr) (void)cudaFree(cublas_workspace_);
  if (collective_stream_ != nullptr) (void)cudaStreamDestroy(collective_stream_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

std::string CudaBackend::description() const {
  int runtime = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  int cublas = 0;
  (void)cublasGetVersion(cublas_, &cublas);
  const char* math = compute_type_ == CUBLAS_COMPUTE_32F             ? "fp32"
                     : compute_type_ == CUBLAS_COMPUTE_32F_FAST_TF32 ? "tf32 tensor cores"
                                                                     : "bf16 tensor cores";
#ifdef CHIMERA_HAVE_NCCL
  int nccl_version = 0;
  (void)ncclGetVersion(&nccl_version);
  const std::string nccl = fmt::format("NCCL {}", nccl_version);
#else
  // Said in every GPU run's log: a build that missed NCCL sums gradients through MPI.
  const std::string nccl = "no NCCL (built without it: gradient sums go through MPI)";
#endif
  return fmt::format(
      "cuda: {} (compute {}.{}, {} SMs, {} MHz, {:.1f} GiB) device {} [{}]; GEMMs {} (cuBLAS "
      "{}), other kernels and all storage fp32; CUDA runtime {}.{}; {}",
      info_.name, info_.major, info_.minor, info_.sm_count, info_.clock_khz / 1000,
      static_cast<double>(info_.memory_bytes) / (1 << 30), device_, info_.pci_bus_id, math, cublas,
      runtime / 1000, runtime % 1000 / 10, nccl);
}

// --- memory ------------------------------------------------------------------------------------

void* CudaBackend::allocate(std::size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t rc = cudaMalloc(&ptr, std::max<std::size_t>(bytes, 1));
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    throw Error(fmt::format(
        "{}out of GPU memory allocating {:.1f} MiB on {} ({:.0f} of {:.0f} MiB free): use a "
        "smaller parallel.micro_batch_size, more stages, or parallel.recompute = true",
        rank_prefix(), mib(bytes), info_.name, mib(free), mib(total)));
  }
  CUDA_CHECK(rc);
  return ptr;
}

void CudaBackend::deallocate(void* ptr) noexcept {
  (void)cudaFree(ptr);
}

void* CudaBackend::allocate_host(std::size_t bytes) {
  void* ptr = nullptr;
  CUDA_CHECK(cudaMallocHost(&ptr, std::max<std::size_t>(bytes, 1)));
  return ptr;
}

void CudaBackend::deallocate_host(void* ptr) noexcept {
  (void)cudaFreeHost(ptr);
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaBackend::scratch(std::size_t bytes) {
  if (bytes > scratch_bytes_) {
    const std::size_t rounded = (bytes + kScratchGranule - 1) / kScratchGranule * kScratchGranule;
    scratch_.push_back(allocate(rounded));  // the old one may still be read by queued kernels
    scratch_bytes_ = rounded;
  }
  return scratch_.back();
}

void* CudaBackend::pinned_scratch(std::size_t bytes) {
  if (bytes > pinned_scratch_bytes_) {
    const std::size_t rounded = (bytes + kScratchGranule - 1) / kScratchGranule * kScratchGranule;
    pinned_scratch_.push_back(allocate_host(rounded));
    pinned_scratch_bytes_ = rounded;
  }
  return pinned_scratch_.back();
}

// --- device facts -------------------------------------------------------------------------------

std::string CudaBackend::device_id() const {
  return info_.pci_bus_id;
}

std::optional<PeakFlops> CudaBackend::peak_flops() const {
  return device_peak(info_, precision_);
}

// make_backend's entry point (declared weak in backend.cpp).
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace chimera::backend::cuda

// The same entry point, found by name where this code is the `chimera` binary's plugin.
extern "C" [[gnu::visibility("default")]] auto chimera_cuda_backend_factory()
    -> std::unique_ptr<chimera::backend::Backend> (*)(const chimera::backend::BackendOptions&) {
  return &chimera::backend::cuda::make_cuda_backend;
}
