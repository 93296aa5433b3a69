#include "chimera/comm/loopback_transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

using schedule::Message;

std::shared_ptr<LoopbackHub::Delivery> LoopbackHub::deliver(const Key& key) {
  const auto it = channels_.find(key);
  auto delivery = it->second.delivery;
  if (it->second.data != nullptr && it->second.dest != nullptr) {
    std::memcpy(it->second.dest, it->second.data, floats_ * sizeof(float));
    delivery->done = true;
    channels_.erase(it);
    changed_.notify_all();
  }
  return delivery;
}

LoopbackHub::Key LoopbackTransport::key(const Message& m) const {
  return {replica_, m.key(), m.src, m.dst};
}

Transport::Request LoopbackTransport::add(std::shared_ptr<LoopbackHub::Delivery> delivery) {
  if (free_.empty()) {
    pending_.push_back({std::move(delivery)});
    return static_cast<Request>(pending_.size()) - 1;
  }
  const Request r = free_.back();
  free_.pop_back();
  pending_[static_cast<std::size_t>(r)] = {std::move(delivery)};
  return r;
}

Transport::Request LoopbackTransport::post_recv(const Message& m, float* buffer) {
  CHIMERA_CHECK(m.dst == worker_, "worker {} posts a receive addressed to worker {}", worker_,
                m.dst);
  const std::lock_guard lock(hub_.mutex_);
  auto& c = hub_.channels_[key(m)];
  CHIMERA_CHECK(c.dest == nullptr, "receive of stage {} micro-batch {} posted twice", m.stage,
                m.mb);
  c.dest = buffer;
  return add(hub_.deliver(key(m)));
}

Transport::Request LoopbackTransport::send(const Message& m, const float* buffer) {
  CHIMERA_CHECK(m.src == worker_, "worker {} sends a message from worker {}", worker_, m.src);
  const std::lock_guard lock(hub_.mutex_);
  auto& c = hub_.channels_[key(m)];
  CHIMERA_CHECK(c.data == nullptr, "stage {} micro-batch {} sent twice", m.stage, m.mb);
  c.data = buffer;
  return add(hub_.deliver(key(m)));
}

template <typename Done>
void LoopbackTransport::block(std::unique_lock<std::mutex>& lock, Done done,
                              const WaitLabel& label) {
  const auto limit = std::chrono::duration<double>(hub_.timeout_s_);
  if (!hub_.changed_.wait_for(lock, limit, done)) {
    throw Error(fmt::format("loopback worker {} of replica {} waited {} s for the {} (deadlock?)",
                            worker_, replica_, hub_.timeout_s_, label ? label() : "event"));
  }
}

bool LoopbackTransport::test(Request r) {
  const std::lock_guard lock(hub_.mutex_);
  const bool done = pending_.at(static_cast<std::size_t>(r)).delivery->done;
  if (done) free_.push_back(r);
  return done;
}

void LoopbackTransport::wait(Request r, const WaitLabel& label) {
  std::unique_lock lock(hub_.mutex_);
  const auto& delivery = *pending_.at(static_cast<std::size_t>(r)).delivery;
  block(
      lock, [&] { return delivery.done; }, label);
  free_.push_back(r);
}

int LoopbackTransport::add_sum(const GradBuffer& buffer) {
  const std::lock_guard lock(hub_.mutex_);
  auto& members = hub_.groups_[buffer.stage].members;
  members.push_back({replica_, worker_, buffer});
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
    return std::tie(a.replica, a.worker) < std::tie(b.replica, b.worker);
  });
  sums_.push_back({buffer.stage});
  timings_.push_back({buffer.name, 0.0, 0.0});
  return static_cast<int>(sums_.size()) - 1;
}

void LoopbackTransport::start_sum(int key) {
  const std::lock_guard lock(hub_.mutex_);
  MySum& mine = sums_.at(static_cast<std::size_t>(key));
  CHIMERA_CHECK(!mine.running, "sum '{}' started twice in one iteration",
                timings_[static_cast<std::size_t>(key)].name);
  timings_[static_cast<std::size_t>(key)].start_s = now_seconds();
  auto& group = hub_.groups_.at(mine.stage);
  mine.running = true;
  mine.started = true;
  mine.ticket = group.completed;
  if (++group.started < static_cast<int>(group.members.size())) return;
  // The last member to start adds everyone's buffer, in member order, into each.
  const std::size_t count = group.members.front().buffer.count;
  std::vector<float> total(count, 0.0F);
  for (const auto& m : group.members) {
    CHIMERA_CHECK(m.buffer.count == count, "sum '{}': members hold {} and {} floats", m.buffer.name,
                  count, m.buffer.count);
    for (std::size_t i = 0; i < count; ++i) total[i] += m.buffer.data[i];
  }
  for (const auto& m : group.members) std::copy(total.begin(), total.end(), m.buffer.data);
  group.started = 0;
  ++group.completed;
  hub_.changed_.notify_all();
}

bool LoopbackTransport::sum_done(const MySum& s) const {
  return hub_.groups_.at(s.stage).completed > s.ticket;
}

bool LoopbackTransport::progress() {
  const std::lock_guard lock(hub_.mutex_);
  bool running = false;
  for (std::size_t k = 0; k < sums_.size(); ++k) {
    MySum& s = sums_[k];
    if (!s.running) continue;
    if (sum_done(s)) {
      s.running = false;
      timings_[k].done_s = now_seconds();
    } else {
      running = true;
    }
  }
  return running;
}

void LoopbackTransport::wait_sums(const WaitLabel& context) {
  std::unique_lock lock(hub_.mutex_);
  for (std::size_t k = 0; k < sums_.size(); ++k) {
    MySum& s = sums_[k];
    CHIMERA_CHECK(s.started, "gradient '{}' was never marked ready this iteration",
                  timings_[k].name);
    s.started = false;
    if (!s.running) continue;
    block(
        lock, [&] { return sum_done(s); },
        [&] { return fmt::format("sum of '{}' {}", timings_[k].name, context ? context() : ""); });
    s.running = false;
    timings_[k].done_s = now_seconds();
  }
}

std::string LoopbackTransport::peer_name(int worker) const {
  return fmt::format("worker {}", worker);
}

}  // namespace chimera::comm
