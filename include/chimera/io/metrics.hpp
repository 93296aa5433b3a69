#pragma once
// `--metrics FILE`: one JSON object per iteration (DESIGN §5), flushed line by line so that a
// crashed or killed run keeps every completed step.
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace chimera::io {

struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double iter_ms = 0.0;
  double tokens_per_s = 0.0;
  double bubble_ratio = 0.0;  // measured: idle / iteration time, mean over workers
  // The part of bubble_ratio ranks were runnable but had no core (Linux schedstat): with more
  // ranks than cores, bubble_ratio - core_wait_ratio is the wait for messages. NaN (null in
  // JSON) where the kernel does not say.
  double core_wait_ratio = 0.0;
  std::int64_t peak_act_bytes = 0;
  bool skipped = false;            // train.on_nonfinite = skip left this step's update out
  std::int64_t skipped_steps = 0;  // steps skipped so far in the run, this one included
  std::optional<double> val_loss;  // on evaluation steps
};

std::string to_json_line(const StepMetrics& m);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // append = true when resuming, so the earlier steps stay in the file.
  MetricsWriter(const std::string& path, bool append);
  bool is_open() const { return out_.is_open(); }
  void write(const StepMetrics& m);

 private:
  std::ofstream out_;
  std::string path_;
};

}  // namespace chimera::io
