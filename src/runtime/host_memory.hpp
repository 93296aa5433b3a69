#pragma once
// A model too large for the machine must be refused at setup with one line, not end in a bare
// std::bad_alloc or in the kernel's OOM killer after minutes of allocating (and with the memory
// of every other job on the node taken meanwhile). Checked from the configuration alone, before
// anything of the size of the model (even its partition) is computed.
#include <cstdint>
#include <optional>
#include <string>

#include "chimera/core/config.hpp"

namespace chimera::runtime {

// Bytes every worker holds at least, whatever the scheme: its share (1 / parallel.stages) of
// the transformer blocks' weights, with their gradients and AdamW's two moments (4 fp32 values
// per parameter). Embeddings, activations and workspaces come on top: a lower bound.
std::int64_t parameter_state_bytes_per_worker(const Config& config);

// The machine's physical memory in bytes (0 where the system does not say).
std::int64_t physical_memory_bytes();

// Why the run cannot fit in `memory_bytes` of host memory per worker (nullopt when it may, or
// when `memory_bytes` is 0: unknown).
std::optional<std::string> exceeds_host_memory(const Config& config, std::int64_t memory_bytes);

}  // namespace chimera::runtime
