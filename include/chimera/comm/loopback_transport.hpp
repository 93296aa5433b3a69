#pragma once
// The executor's transport inside one process (transport.hpp): every worker of every replica of a
// schedule runs as a thread with its own LoopbackTransport on one shared LoopbackHub. Messages are
// rendezvous: a send completes only once its receiver has copied the data out of the sender's
// buffer, as a large MPI message does, so a program that reused a buffer too early or waited for
// its own sends too soon fails here as it would under MPI. A sum completes when every endpoint
// that registered the same stage has started it; it adds the members' buffers in (replica,
// worker) order and writes the result into each. A wait that lasts longer than the hub's
// timeout throws chimera::Error naming it, so a deadlock fails a test instead of hanging it.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "chimera/comm/transport.hpp"

namespace chimera::comm {

class LoopbackHub {
 public:
  LoopbackHub(std::size_t message_floats, double timeout_s = 30.0)
      : floats_(message_floats), timeout_s_(timeout_s) {}

 private:
  friend class LoopbackTransport;
  // (replica, message, src, dst)
  using Key = std::tuple<int, schedule::MessageKey, int, int>;
  // Shared by a message's send and receive requests: set once the data has been copied.
  struct Delivery {
    bool done = false;
  };
  // A message waiting for its other side; it leaves the map once both are there and the data
  // moved, so the next iteration's message with the same key starts afresh.
  struct Channel {
    const float* data = nullptr;  // the sender's buffer, once sent
    float* dest = nullptr;        // the receiver's buffer, once posted
    std::shared_ptr<Delivery> delivery = std::make_shared<Delivery>();
  };
  struct Member {
    int replica, worker;
    GradBuffer buffer;
  };
  struct SumGroup {
    std::vector<Member> members;
    int started = 0;
    std::uint64_t completed = 0;  // sums completed so far
  };
  // Copies and retires the channel at `key` once both sides are there; returns its delivery. The
  // caller holds the lock.
  std::shared_ptr<Delivery> deliver(const Key& key);

  std::size_t floats_;
  double timeout_s_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Channel> channels_;
  std::map<int, SumGroup> groups_;  // by stage, -1 = tied table
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackHub& hub, int replica, int worker)
      : hub_(hub), replica_(replica), worker_(worker) {}

  Request post_recv(const schedule::Message& m, float* buffer) override;
  Request send(const schedule::Message& m, const float* buffer) override;
  bool test(Request r) override;
  void wait(Request r, const WaitLabel& label) override;
  int add_sum(const GradBuffer& buffer) override;
  void start_sum(int key) override;
  bool progress() override;
  void wait_sums(const WaitLabel& context) override;
  std::vector<SumTiming> sum_timings() const override { return timings_; }
  std::string peer_name(int worker) const override;

 private:
  struct Pending {
    std::shared_ptr<LoopbackHub::Delivery> delivery;
  };
  struct MySum {
    int stage;
    bool running = false;
    bool started = false;      // this iteration
    std::uint64_t ticket = 0;  // complete once the group's completed count exceeds it
  };
  LoopbackHub::Key key(const schedule::Message& m) const;
  Request add(std::shared_ptr<LoopbackHub::Delivery> delivery);
  bool sum_done(const MySum& s) const;
  // Waits on the hub until `done()` holds, or throws after the hub's timeout.
  template <typename Done>
  void block(std::unique_lock<std::mutex>& lock, Done done, const WaitLabel& label);

  LoopbackHub& hub_;
  int replica_, worker_;
  std::vector<Pending> pending_;
  std::vector<Request> free_;
  std::vector<MySum> sums_;
  std::vector<SumTiming> timings_;
};

}  // namespace chimera::comm
