#pragma once
// The helper thread of an asynchronous save: writes this rank's pieces of a checkpoint file
// (io::write_raw_pieces: plain pwrite at each tensor's offset, then fsync) while the main thread
// trains. It calls neither MPI nor HDF5, so it needs no MPI_THREAD_MULTIPLE and no thread-safe
// HDF5 build. Where the pieces are the live state (host memory), it writes them as they are
// while the main thread only reads the state; when the main thread is about to change it
// (wait_copied), the thread copies what it has not written yet into the snapshot and goes on
// from there. A write that ends within a step so costs one copy (into the page cache), not two.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chimera/io/checkpoint.hpp"

namespace chimera::runtime {

class BackgroundWrite {
 public:
  BackgroundWrite() = default;
  ~BackgroundWrite();  // waits for the thread
  BackgroundWrite(const BackgroundWrite&) = delete;
  BackgroundWrite& operator=(const BackgroundWrite&) = delete;

  // Starts writing `pieces` (whose data must outlive the write) into `path`; nothing to write is
  // done at once. With `copies`, the pieces may be the live state: what is unwritten when
  // wait_copied() is called is copied into *copies (buffers reused) first.
  void start(std::string path, std::vector<io::RawPiece> pieces,
             std::vector<std::vector<float>>* copies = nullptr);
  // Before the live state changes: waits until every piece is written or copied (at most one
  // 4 MiB piece's write, then the copy of the rest; at once without `copies`).
  void wait_copied();
  // Whether the write has ended (or none was started). Any thread may ask.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits for the write to end: "" when written and flushed to disk, else what failed.
  std::string wait();
  // How long the last write took (this rank's), once done().
  double seconds() const { return seconds_; }
  // Of seconds(): the wait for the disk at the end (fsync), once done().
  double flush_seconds() const { return flush_seconds_; }

 private:
  std::thread thread_;
  std::atomic<bool> done_{true};
  std::mutex mutex_;
  std::condition_variable copied_changed_;
  bool copied_ = true;  // guarded by mutex_
  std::atomic<bool> copy_requested_{false};
  std::string failure_;
  double seconds_ = 0.0;
  double flush_seconds_ = 0.0;
};

}  // namespace chimera::runtime
