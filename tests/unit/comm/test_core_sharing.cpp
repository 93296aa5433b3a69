// The run-queue delay read from Linux schedstat, which the trainer reports beside the bubble.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "chimera/comm/core_sharing.hpp"

namespace chimera::comm {
namespace {

TEST(CoreSharing, ParsesTheRunQueueDelayOfASchedstatLine) {
  EXPECT_DOUBLE_EQ(*parse_schedstat("123456789 2500000000 42\n"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_schedstat("0 0 0"), 0.0);
  EXPECT_FALSE(parse_schedstat(""));
  EXPECT_FALSE(parse_schedstat("12"));
  EXPECT_FALSE(parse_schedstat("x 1 2"));
}

TEST(CoreSharing, ThreadsCompetingForOneCoreWaitInTheRunQueue) {
  const RunQueueClock clock;
  if (!clock.seconds()) GTEST_SKIP() << "this kernel has no /proc/thread-self/schedstat";
  // Pin this thread and two spinners to one CPU: this thread then waits for it most of the time.
  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t old;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old), &old), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &old)) ++cpu;
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const double before = *clock.seconds();
  std::atomic<bool> done{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < 2; ++i)
    spinners.emplace_back([&] {
      while (!done.load()) {
      }
    });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
  }
  done = true;
  for (auto& t : spinners) t.join();
  const double waited = *clock.seconds() - before;
  ASSERT_EQ(sched_setaffinity(0, sizeof(old), &old), 0);
  EXPECT_GT(waited, 0.05) << "three threads on one CPU for 0.3 s, this one waited " << waited;
}

}  // namespace
}  // namespace chimera::comm
