#include "host_memory.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace chimera::runtime {

std::int64_t parameter_state_bytes_per_worker(const Config& config) {
  const auto C = static_cast<std::int64_t>(config.model.n_embd);
  // Per block: attention c_attn (3C^2 + 3C) and c_proj (C^2 + C), MLP c_fc (4C^2 + 4C) and
  // c_proj (4C^2 + C), two LayerNorms (4C).
  const std::int64_t per_block = 12 * C * C + 13 * C;
  // Some worker holds at least its share of the blocks (Chimera's workers hold two stages).
  const std::int64_t workers = std::max(config.parallel.stages, 1);
  const std::int64_t blocks = (config.model.n_layer + workers - 1) / workers;
  constexpr std::int64_t kStateBytesPerParameter = 4 * sizeof(float);
  return blocks * per_block * kStateBytesPerParameter;
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

std::optional<std::string> exceeds_host_memory(const Config& config, std::int64_t memory_bytes) {
  const std::int64_t needed = parameter_state_bytes_per_worker(config);
  if (memory_bytes <= 0 || needed <= memory_bytes) return std::nullopt;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return fmt::format(
      "model.n_layer = {} and n_embd = {} over parallel.stages = {} need at least {:.1f} GiB per "
      "worker for weights, gradients and AdamW state (before activations), more than this "
      "machine's {:.1f} GiB: use a smaller model, or more stages over more nodes",
      config.model.n_layer, config.model.n_embd, config.parallel.stages,
      static_cast<double>(needed) / kGiB, static_cast<double>(memory_bytes) / kGiB);
}

}  // namespace chimera::runtime
