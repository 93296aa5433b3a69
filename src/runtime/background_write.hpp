#pragma once
// The helper thread of an asynchronous save: writes this rank's pieces of a checkpoint file
// (io::write_raw_pieces: plain pwrite at each tensor's offset, then fsync) while the main thread
// trains. It calls neither MPI nor HDF5, so it needs no MPI_THREAD_MULTIPLE and no thread-safe
// HDF5 build.
#include <atomic>
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
  // done at once.
  void start(std::string path, std::vector<io::RawPiece> pieces);
  // Whether the write has ended (or none was started). Any thread may ask.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits for the write to end: "" when written and flushed to disk, else what failed.
  std::string wait();

 private:
  std::thread thread_;
  std::atomic<bool> done_{true};
  std::string failure_;
};

}  // namespace chimera::runtime
