#include "message_staging.hpp"

namespace chimera::runtime {

std::string_view to_string(MessagePath path) {
  return path == MessagePath::Direct ? "direct" : "host staging";
}

MessageStaging::MessageStaging(backend::Backend& backend, MessagePath path, std::size_t floats)
    : backend_(backend), path_(path), floats_(floats) {
  if (path_ == MessagePath::HostStaged) {
    in_ = backend::DeviceBuffer(backend_, floats_ * sizeof(float));
    out_ = backend::DeviceBuffer(backend_, floats_ * sizeof(float));
  }
}

float* MessageStaging::allocate() {
  const std::size_t bytes = floats_ * sizeof(float);
  return static_cast<float*>(path_ == MessagePath::Direct ? backend_.allocate(bytes)
                                                          : backend_.allocate_host(bytes));
}

void MessageStaging::deallocate(float* message) noexcept {
  if (message == nullptr) return;
  if (path_ == MessagePath::Direct) {
    backend_.deallocate(message);
  } else {
    backend_.deallocate_host(message);
  }
}

const float* MessageStaging::incoming(const float* message) {
  if (message == nullptr || path_ == MessagePath::Direct) return message;
  backend_.copy_from_host(in_.data(), message, in_.bytes());
  return in_.f32();
}

float* MessageStaging::outgoing(float* message) {
  if (message == nullptr || path_ == MessagePath::Direct) return message;
  return out_.f32();
}

void MessageStaging::finish(float* message) {
  if (message != nullptr && path_ == MessagePath::HostStaged) {
    backend_.copy_to_host(message, out_.data(), out_.bytes());  // waits for the model's calls
  } else {
    backend_.synchronize();
  }
}

}  // namespace chimera::runtime
