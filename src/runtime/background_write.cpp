#include "background_write.hpp"

#include <algorithm>

#include "chimera/core/timer.hpp"
#include "hang_hook.hpp"

namespace chimera::runtime {

BackgroundWrite::~BackgroundWrite() {
  if (thread_.joinable()) thread_.join();
}

namespace {

// Pieces of at most this many floats (4 MiB): the main thread's wait for a copy is at most one
// piece's write.
constexpr std::size_t kChunkFloats = std::size_t{1} << 20;

std::vector<io::RawPiece> chunks_of(const std::vector<io::RawPiece>& pieces) {
  std::vector<io::RawPiece> out;
  for (const io::RawPiece& p : pieces) {
    for (std::size_t at = 0; at < p.data.size(); at += kChunkFloats) {
      const std::size_t n = std::min(kChunkFloats, p.data.size() - at);
      out.push_back(
          {p.offset + static_cast<std::int64_t>(at * sizeof(float)), p.data.subspan(at, n)});
    }
  }
  return out;
}

}  // namespace

void BackgroundWrite::start(std::string path, std::vector<io::RawPiece> pieces,
                            std::vector<std::vector<float>>* copies) {
  if (thread_.joinable()) thread_.join();
  failure_.clear();
  seconds_ = 0.0;
  flush_seconds_ = 0.0;
  if (pieces.empty()) return;
  done_.store(false, std::memory_order_release);
  copied_ = copies == nullptr;
  copy_requested_ = false;
  thread_ = std::thread([this, path = std::move(path), chunks = chunks_of(pieces), copies] {
    const Stopwatch clock;
    std::vector<io::RawPiece> to_write = chunks;
    const auto mark_copied = [this] {
      {
        const std::lock_guard lock(mutex_);
        copied_ = true;
      }
      copied_changed_.notify_all();
    };
    for (std::size_t i = 0; i < to_write.size() && failure_.empty(); ++i) {
      // The live state is written as it is until the main thread is about to change it; then
      // what is left is copied first (the write of the chunks before needed no copy at all).
      if (!copied_ && copy_requested_.load(std::memory_order_acquire)) {
        copies->resize(to_write.size());
        for (std::size_t k = i; k < to_write.size(); ++k) {
          (*copies)[k].assign(chunks[k].data.begin(), chunks[k].data.end());
          to_write[k].data = (*copies)[k];
        }
        mark_copied();
      }
      // Test only (hang_hook.hpp): a slow write, so that a test sees the state change meanwhile.
      static const auto delay = test_delay_from_environment("CHIMERA_TEST_SAVE_WRITE_DELAY_MS");
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      failure_ = io::write_raw_pieces(path, std::span(to_write).subspan(i, 1), false);
    }
    if (!copied_) mark_copied();  // all written from the live state
    const double written_s = clock.seconds();
    if (failure_.empty()) failure_ = io::write_raw_pieces(path, {}, true);
    seconds_ = clock.seconds();
    flush_seconds_ = seconds_ - written_s;
    done_.store(true, std::memory_order_release);
  });
}

void BackgroundWrite::wait_copied() {
  copy_requested_.store(true, std::memory_order_release);
  std::unique_lock lock(mutex_);
  copied_changed_.wait(lock, [this] { return copied_; });
}

std::string BackgroundWrite::wait() {
  if (thread_.joinable()) thread_.join();
  return failure_;
}

}  // namespace chimera::runtime
