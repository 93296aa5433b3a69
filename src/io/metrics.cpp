#include "chimera/io/metrics.hpp"

#include <fmt/format.h>

#include <cmath>

#include "chimera/core/error.hpp"
#include "chimera/io/paths.hpp"

namespace chimera::io {

namespace {
// JSON has no NaN or Infinity: a diverged loss is written as null rather than as invalid JSON.
std::string number(double x) {
  return std::isfinite(x) ? fmt::format("{}", x) : "null";
}
}  // namespace

std::string to_json_line(const StepMetrics& m) {
  std::string line = fmt::format(
      "{{\"step\": {}, \"loss\": {}, \"lr\": {}, \"grad_norm\": {}, \"iter_ms\": {}, "
      "\"tokens_per_s\": {}, \"bubble_ratio\": {}, \"core_wait_ratio\": {}, "
      "\"peak_act_bytes\": {}, \"skipped\": {}, \"skipped_steps\": {}",
      m.step, number(m.loss), number(m.lr), number(m.grad_norm), number(m.iter_ms),
      number(m.tokens_per_s), number(m.bubble_ratio), number(m.core_wait_ratio), m.peak_act_bytes,
      m.skipped, m.skipped_steps);
  if (m.val_loss) line += fmt::format(", \"val_loss\": {}", number(*m.val_loss));
  line += "}";
  return line;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  create_parent_directory(path);
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  CHIMERA_REQUIRE(out_.is_open(), "cannot open metrics file '{}' for writing", path);
}

void MetricsWriter::write(const StepMetrics& m) {
  out_ << to_json_line(m) << '\n';
  out_.flush();
  CHIMERA_CHECK(out_.good(), "writing metrics to '{}' failed (disk full?)", path_);
}

}  // namespace chimera::io
