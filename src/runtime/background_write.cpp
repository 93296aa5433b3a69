#include "background_write.hpp"

namespace chimera::runtime {

BackgroundWrite::~BackgroundWrite() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWrite::start(std::string path, std::vector<io::RawPiece> pieces) {
  if (thread_.joinable()) thread_.join();
  failure_.clear();
  if (pieces.empty()) return;
  done_.store(false, std::memory_order_release);
  thread_ = std::thread([this, path = std::move(path), pieces = std::move(pieces)] {
    failure_ = io::write_raw_pieces(path, pieces);
    done_.store(true, std::memory_order_release);
  });
}

std::string BackgroundWrite::wait() {
  if (thread_.joinable()) thread_.join();
  return failure_;
}

}  // namespace chimera::runtime
