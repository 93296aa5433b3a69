#pragma once
// Monotonic time for measurements (iteration times, traces, progress bars).
#include <chrono>
#include <cstdint>

namespace chimera {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(now_seconds()) {}
  void reset() { start_ = now_seconds(); }
  double seconds() const { return now_seconds() - start_; }
  double ms() const { return seconds() * 1e3; }

 private:
  double start_;
};

}  // namespace chimera
