#include "chimera/io/metrics.hpp"

#include <nlohmann/json.hpp>

#include "chimera/core/error.hpp"
#include "chimera/io/json_line.hpp"
#include "chimera/io/paths.hpp"

namespace chimera::io {

// The keys in the order DESIGN §5 lists them. A NaN or an infinity is written as null (JSON has
// neither), so a diverged loss still makes a valid line.
std::string to_json_line(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["iter_ms"] = m.iter_ms;
  j["tokens_per_s"] = m.tokens_per_s;
  j["bubble_ratio"] = m.bubble_ratio;
  j["core_wait_ratio"] = m.core_wait_ratio;
  j["peak_act_bytes"] = m.peak_act_bytes;
  j["skipped"] = m.skipped;
  j["skipped_steps"] = m.skipped_steps;
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  return json_object_line(j);
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
