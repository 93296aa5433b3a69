// CpuBackend: construction, description and memory.
#include "cpu_backend.hpp"

#include <malloc.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "bf16_gemm.hpp"
#include "chimera/core/error.hpp"
#include "parallel.hpp"

namespace chimera::backend::cpu {

namespace {
constexpr std::size_t kAlignment = 64;
}

CpuBackend::CpuBackend(CpuPrecision precision, std::string note, const std::string& bf16_engine)
    : precision_(precision), note_(std::move(note)) {
  select_blis_kernels();
  fp32_gemm_engine();  // an unknown CHIMERA_CPU_GEMM fails here, not in the first GEMM
  if (precision == CpuPrecision::Bf16) {
    auto [kind, why] = Bf16Gemm::choose_for_bf16(bf16_engine);
    bf16_ = Bf16Gemm::make(kind, std::move(why));
  } else if (precision == CpuPrecision::Bf16Emulated) {
    bf16_ = Bf16Gemm::make(Bf16Gemm::Kind::Emulated);
  }
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::description() const {
  std::string gemms = bf16_ ? bf16_->description() : "fp32 GEMMs on " + fp32_gemm_description();
  if (!note_.empty()) gemms += fmt::format("; {}", note_);
  return fmt::format("cpu: {}, {} OpenMP threads", gemms, omp_get_max_threads());
}

std::string CpuBackend::gemm_precision() const {
  switch (precision_) {
    case CpuPrecision::Bf16:
      return "bf16";
    case CpuPrecision::Bf16Emulated:
      return "bf16-emulated";
    case CpuPrecision::Fp32:
      break;
  }
  return "fp32";
}

std::string CpuBackend::gemm_engine() const {
  if (!bf16_) return {};
  return bf16_->multiplies_bf16_bits() ? "oneDNN" : "fp32 units";
}

void CpuBackend::register_weights(const float* data, Index n) {
  if (bf16_) bf16_->register_weights(data, n);
}

std::uint64_t CpuBackend::weight_conversions() const {
  return bf16_ ? bf16_->weight_conversions() : 0;
}

double CpuBackend::conversion_seconds() const {
  return bf16_ ? bf16_->conversion_seconds() : 0.0;
}

void CpuBackend::written(const void* dst, std::size_t bytes) {
  if (bf16_) bf16_->weights_written(dst, bytes);
}

void* CpuBackend::allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (ptr == nullptr) {
    throw Error(fmt::format("{}out of host memory allocating {:.1f} MiB", rank_prefix(),
                            static_cast<double>(bytes) / (1 << 20)));
  }
  return ptr;
}

void CpuBackend::deallocate(void* ptr) noexcept {
  // Weights registered in this allocation end with it.
  if (bf16_ && ptr != nullptr) bf16_->forget(ptr, malloc_usable_size(ptr));
  std::free(ptr);
}

void CpuBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  written(dst, bytes);
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  written(dst, bytes);
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

void CpuBackend::fill_zero(void* dst, std::size_t bytes) {
  written(dst, bytes);
  // The gradient reset clears ~100 MB per step; one thread's stores fall short of the memory
  // bandwidth, so large fills split into one contiguous stretch per thread.
  const auto floats = static_cast<Index>(bytes / sizeof(float));
  if (floats < kParallelMinElements) {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return;
  }
  auto* bytes_begin = static_cast<unsigned char*>(dst);
  const auto threads = static_cast<std::size_t>(omp_get_max_threads());
#pragma omp parallel for schedule(static)
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
    std::memset(bytes_begin + begin, 0, end - begin);
  }
}

}  // namespace chimera::backend::cpu
