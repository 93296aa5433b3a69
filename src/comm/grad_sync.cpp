#include "chimera/comm/grad_sync.hpp"

#include <climits>

#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

int GradSync::add(std::string name, float* data, std::size_t count, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return -1;
  CHIMERA_CHECK(count <= static_cast<std::size_t>(INT_MAX),
                "gradient buffer '{}' has {} floats, more than one MPI call can sum", name, count);
  Slot slot;
  slot.data = data;
  slot.count = count;
  slot.comm = comm;
  slots_.push_back(std::move(slot));
  timings_.push_back(Timing{std::move(name), 0.0, 0.0});
  return static_cast<int>(slots_.size()) - 1;
}

int GradSync::add(std::string name, std::unique_ptr<AsyncSum> sum) {
  CHIMERA_CHECK(sum != nullptr, "gradient buffer '{}' registered without its sum", name);
  Slot slot;
  slot.async = std::move(sum);
  slots_.push_back(std::move(slot));
  timings_.push_back(Timing{std::move(name), 0.0, 0.0});
  return static_cast<int>(slots_.size()) - 1;
}

void GradSync::start(int key) {
  auto& s = slots_.at(static_cast<std::size_t>(key));
  CHIMERA_CHECK(!s.started, "allreduce '{}' started twice in one iteration",
                timings_[static_cast<std::size_t>(key)].name);
  timings_[static_cast<std::size_t>(key)] =
      Timing{timings_[static_cast<std::size_t>(key)].name, now_seconds(), 0.0};
  if (s.async) {
    s.async->start();
  } else {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, s.data, static_cast<int>(s.count), MPI_FLOAT, MPI_SUM,
                             s.comm, &s.request));
  }
  s.running = true;
  s.started = true;
}

bool GradSync::poll() {
  bool running = false;
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    auto& s = slots_[k];
    if (!s.running) continue;
    int done = 0;
    if (s.async) {
      done = s.async->test() ? 1 : 0;
    } else {
      MPI_CHECK(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE));
    }
    if (done != 0) {
      timings_[k].done_s = now_seconds();
      s.running = false;
    } else {
      running = true;
    }
  }
  return running;
}

void GradSync::wait_all(const WaitPolicy& policy, const WaitLabel& context) {
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    auto& s = slots_[k];
    CHIMERA_CHECK(s.started, "gradient '{}' was never marked ready this iteration (schedule bug)",
                  timings_[k].name);
    if (s.running) {
      // poll() tests every running sum, so the others progress while this one is awaited.
      struct Wait {
        GradSync& sync;
        const Slot& slot;
      } w{*this, s};
      wait_until(
          [](void* self) {
            auto& x = *static_cast<Wait*>(self);
            x.sync.poll();
            return x.slot.running ? WaitState::Busy : WaitState::Done;
          },
          &w, policy, nullptr,
          [&] {
            const std::string over = ranks_and_hosts(s.comm);
            return context ? fmt::format("allreduce of gradient '{}'{} {}", timings_[k].name, over,
                                         context())
                           : fmt::format("allreduce of gradient '{}'{}", timings_[k].name, over);
          });
    }
    s.started = false;
  }
}

bool GradSync::started(int key) const {
  return slots_.at(static_cast<std::size_t>(key)).started;
}

}  // namespace chimera::comm
