#pragma once
// An owning, move-only allocation of backend memory.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "chimera/backend/backend.hpp"

namespace chimera::backend {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, std::size_t bytes)
      : backend_(&backend), data_(bytes > 0 ? backend.allocate(bytes) : nullptr), bytes_(bytes) {}
  // Zero-filled buffer of `count` floats.
  static DeviceBuffer zeros(Backend& backend, std::size_t count) {
    DeviceBuffer buffer(backend, count * sizeof(float));
    if (count > 0) backend.fill_zero(buffer.data(), buffer.bytes());
    return buffer;
  }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : backend_(other.backend_),
        data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = other.backend_;
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  std::size_t bytes() const { return bytes_; }
  std::size_t floats() const { return bytes_ / sizeof(float); }
  bool empty() const { return data_ == nullptr; }

 private:
  void release() noexcept {
    if (data_ != nullptr) backend_->deallocate(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace chimera::backend
