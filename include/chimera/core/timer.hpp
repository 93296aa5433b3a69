#pragma once
// Monotonic time for measurements (iteration times, traces, progress bars), and sleeping.
#include <time.h>

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

// A duration in seconds (>= 0) as the timespec that nanosleep and futex timeouts take.
inline timespec to_timespec(double seconds) {
  const auto ns = static_cast<std::int64_t>(seconds * 1e9);
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// Sleeps about `seconds` (returns early on a signal: callers test their condition again).
inline void sleep_seconds(double seconds) {
  const timespec ts = to_timespec(seconds);
  nanosleep(&ts, nullptr);
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
