#pragma once
// Runs a function on a stream of inputs on several threads and hands the results back in the
// order the inputs came: the caller submits, takes the oldest result, and bounds the memory by
// how many it lets be in flight. An exception thrown by the work is rethrown by take() for that
// input, so the first error in input order is the one reported, at any thread count.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace chimera::data {

template <class In, class Out>
class OrderedPool {
 public:
  using Work = std::function<Out(In&)>;

  // `make_work` is called once per thread, on that thread (to give each thread its own state,
  // e.g. a tokenizer); with threads <= 1 no thread is started, and the work runs inside take().
  OrderedPool(int threads, const std::function<Work()>& make_work) {
    if (threads <= 1) {
      inline_work_ = make_work();
      return;
    }
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, make_work] { run(make_work); });
  }
  OrderedPool(const OrderedPool&) = delete;
  OrderedPool& operator=(const OrderedPool&) = delete;
  ~OrderedPool() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_ready_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

  void submit(In in) {
    {
      const std::lock_guard lock(mutex_);
      slots_.push_back(Slot{std::move(in), std::nullopt, nullptr});
    }
    work_ready_.notify_one();
  }

  // The result of the oldest input not yet taken (blocks until it is done).
  Out take() {
    std::unique_lock lock(mutex_);
    if (threads_.empty()) {
      Slot slot = std::move(slots_.front());
      slots_.pop_front();
      ++first_;
      ++claimed_;
      lock.unlock();
      return inline_work_(slot.in);
    }
    result_ready_.wait(lock, [&] { return slots_.front().out || slots_.front().error; });
    Slot slot = std::move(slots_.front());
    slots_.pop_front();
    ++first_;
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(*slot.out);
  }

  std::size_t in_flight() const {
    const std::lock_guard lock(mutex_);
    return slots_.size();
  }

 private:
  struct Slot {
    In in;
    std::optional<Out> out;
    std::exception_ptr error;
  };

  void run(const std::function<Work()>& make_work) {
    Work work;
    std::exception_ptr setup_error;
    try {
      work = make_work();
    } catch (...) {
      setup_error = std::current_exception();
    }
    std::unique_lock lock(mutex_);
    while (true) {
      work_ready_.wait(lock, [&] { return stop_ || claimed_ < first_ + slots_.size(); });
      if (stop_) return;
      const std::uint64_t seq = claimed_++;
      In in = std::move(slots_[seq - first_].in);
      lock.unlock();
      std::optional<Out> out;
      std::exception_ptr error = setup_error;
      if (!error) {
        try {
          out.emplace(work(in));
        } catch (...) {
          error = std::current_exception();
        }
      }
      lock.lock();
      Slot& slot = slots_[seq - first_];  // not taken yet: take() waits for it
      slot.out = std::move(out);
      slot.error = error;
      result_ready_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  std::deque<Slot> slots_;     // slots_[i] holds input number first_ + i
  std::uint64_t first_ = 0;    // number of the oldest input not yet taken
  std::uint64_t claimed_ = 0;  // inputs below this number are claimed by a thread
  bool stop_ = false;
  std::vector<std::thread> threads_;
  Work inline_work_;
};

}  // namespace chimera::data
