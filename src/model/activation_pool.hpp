#pragma once
// Reuses activation allocations of the same size (a schedule allocates the same few sizes over
// and over; fresh allocations of hundreds of MB would fault in their pages every time) and counts
// the bytes in use, which is what the schedule's in-flight micro-batches cost.
#include <algorithm>
#include <cstddef>
#include <map>

#include "chimera/backend/buffer.hpp"

namespace chimera::model {

class ActivationPool {
 public:
  explicit ActivationPool(backend::Backend& backend) : backend_(backend) {}

  backend::DeviceBuffer acquire(std::size_t bytes) {
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    const auto it = free_.find(bytes);
    if (it == free_.end()) return backend::DeviceBuffer(backend_, bytes);
    backend::DeviceBuffer buffer = std::move(it->second);
    free_.erase(it);
    return buffer;
  }

  void release(backend::DeviceBuffer buffer) {
    if (buffer.empty()) return;
    in_use_ -= buffer.bytes();
    const std::size_t bytes = buffer.bytes();
    free_.emplace(bytes, std::move(buffer));
  }

  std::size_t in_use() const { return in_use_; }
  std::size_t peak() const { return peak_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  backend::Backend& backend_;
  std::multimap<std::size_t, backend::DeviceBuffer> free_;
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace chimera::model
