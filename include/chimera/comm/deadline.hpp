#pragma once
// A bound on one blocking phase that MPI itself cannot bound. Parallel HDF5's collective file
// open, flush and close wait inside MPI for every rank, and a rank whose file system failed in
// the middle (the directory removed between two ranks' opens, an I/O error on a file system
// without fallocate) can leave them waiting forever. While a Deadline is alive, a helper thread
// watches the clock; past the limit it prints one line (built by `describe`) and ends the job
// through abort_job, because the main thread is stuck inside MPI and cannot.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace chimera::comm {

class Deadline {
 public:
  // `limit_s` <= 0: no bound, no thread. `describe` runs on the helper thread when the limit
  // passes and returns the error line (without "error: "); it must only read what outlives it.
  Deadline(double limit_s, std::function<std::string()> describe);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace chimera::comm
