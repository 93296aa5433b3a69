#pragma once
// Where activation messages (and their gradients) live, and how they reach the model. MPI sends
// and receives messages; the model reads and writes backend memory:
//  - Direct: messages are backend memory, which MPI reads and writes itself (host memory of the
//    CPU backend, or GPU memory with CUDA-aware MPI);
//  - HostStaged: messages are page-locked host memory, copied into a device buffer before a
//    forward or backward reads them and out of one after it wrote them.
#include <cstddef>
#include <string_view>
#include <utility>

#include "chimera/backend/backend.hpp"
#include "chimera/backend/buffer.hpp"

namespace chimera::runtime {

enum class MessagePath { Direct, HostStaged };
std::string_view to_string(MessagePath path);

class MessageStaging {
 public:
  // Messages of `floats` floats each.
  MessageStaging(backend::Backend& backend, MessagePath path, std::size_t floats);

  MessagePath path() const { return path_; }
  std::size_t floats() const { return floats_; }

  // Memory for one message, for MPI.
  float* allocate();
  void deallocate(float* message) noexcept;

  // What the model reads for an incoming message (null stays null): the message itself, or a
  // device copy of it (valid until the next incoming()).
  const float* incoming(const float* message);
  // Where the model writes an outgoing message (null stays null).
  float* outgoing(float* message);
  // After the model's calls: waits for them to finish and puts the outgoing message (if any) in
  // `message`, ready for MPI.
  void finish(float* message);

 private:
  backend::Backend& backend_;
  MessagePath path_;
  std::size_t floats_;
  backend::DeviceBuffer in_, out_;  // device side of host staging
};

}  // namespace chimera::runtime
