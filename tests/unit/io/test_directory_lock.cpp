// One job per checkpoint directory: a live holder refuses a second run with one line naming it,
// and each kind of stale lock (same Slurm job, a process gone from this host, a flock dropped by
// the kernel, no heartbeat from another host) is taken over.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "chimera/io/directory_lock.hpp"
#include "input_error.hpp"

namespace chimera::io {
namespace {

namespace fs = std::filesystem;
using chimera::testing::input_error;
using Clock = std::chrono::steady_clock;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "chimera_lock_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_record(const fs::path& dir, const LockHolder& holder) {
  std::ofstream(DirectoryLock::path_in(dir.string())) << holder.record() << "\n";
}

LockHolder other(const std::string& host, long pid, const std::string& job) {
  return LockHolder{host, pid, job, "2026-01-01T00:00:00Z"};
}

// Unsets SLURM_JOB_ID for a test (the test may run inside a Slurm job) and restores it.
class SlurmJobId {
 public:
  explicit SlurmJobId(const char* value) {
    if (const char* v = getenv("SLURM_JOB_ID")) saved_ = v;
    if (value != nullptr) {
      setenv("SLURM_JOB_ID", value, 1);
    } else {
      unsetenv("SLURM_JOB_ID");
    }
  }
  ~SlurmJobId() {
    if (saved_.empty()) {
      unsetenv("SLURM_JOB_ID");
    } else {
      setenv("SLURM_JOB_ID", saved_.c_str(), 1);
    }
  }

 private:
  std::string saved_;
};

TEST(LockRecord, RoundTripsAndNamesTheHolder) {
  const LockHolder h{"node7", 4242, "1234", "2026-12-06T00:40:00Z"};
  const LockHolder back = LockHolder::parse(h.record());
  EXPECT_EQ(back.host, "node7");
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.slurm_job, "1234");
  EXPECT_EQ(back.started, h.started);
  EXPECT_EQ(h.describe(), "host node7 pid 4242 (Slurm job 1234) since 2026-12-06T00:40:00Z");
  EXPECT_EQ(LockHolder::parse(other("n", 1, "").record()).slurm_job, "");
}

TEST(StaleLockRule, EachWayALockIsStaleOrLive) {
  const LockHolder me{"a", 10, "77", "t"};
  const auto alive = [](long) { return true; };
  const auto dead = [](long) { return false; };
  const auto beat = [] { return true; };
  const auto silent = [] { return false; };
  // The same Slurm job: its earlier instance, whatever else says.
  EXPECT_NE(stale_lock_reason(other("b", 5, "77"), me, Flock::Held, alive, beat), "");
  // Same host: flock decides where it works, the pid where it does not.
  EXPECT_NE(stale_lock_reason(other("a", 5, "1"), me, Flock::Taken, alive, beat), "");
  EXPECT_EQ(stale_lock_reason(other("a", 5, "1"), me, Flock::Held, dead, silent), "");
  EXPECT_NE(stale_lock_reason(other("a", 5, ""), me, Flock::Unsupported, dead, beat), "");
  EXPECT_EQ(stale_lock_reason(other("a", 5, ""), me, Flock::Unsupported, alive, silent), "");
  // Another host: a held flock or a heartbeat is a live holder; silence is a dead one.
  EXPECT_EQ(stale_lock_reason(other("b", 5, ""), me, Flock::Held, dead, silent), "");
  EXPECT_EQ(stale_lock_reason(other("b", 5, ""), me, Flock::Taken, dead, beat), "");
  EXPECT_EQ(stale_lock_reason(other("b", 5, ""), me, Flock::Unsupported, dead, beat), "");
  EXPECT_NE(stale_lock_reason(other("b", 5, ""), me, Flock::Taken, alive, silent), "");
  EXPECT_NE(stale_lock_reason(other("b", 5, ""), me, Flock::Unsupported, alive, silent), "");
}

TEST(DirectoryLock, ALiveHolderRefusesASecondRunNamingIt_ThenItsKilledLockIsTakenOver) {
  const SlurmJobId no_job(nullptr);
  const fs::path dir = fresh_dir("live");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const DirectoryLock lock(dir.string());
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  const auto start = Clock::now();
  const std::string refused = input_error([&] { DirectoryLock second(dir.string()); });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(refused.find("is in use by another run"), std::string::npos) << refused;
  EXPECT_NE(refused.find("pid " + std::to_string(child)), std::string::npos) << refused;
  EXPECT_EQ(refused.find('\n'), std::string::npos);

  // SIGKILL: the record stays, the kernel drops the flock with the process.
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(fs::exists(DirectoryLock::path_in(dir.string())));
  {
    const DirectoryLock successor(dir.string());
    EXPECT_NE(successor.taken_over().find("released with its process"), std::string::npos)
        << successor.taken_over();
    EXPECT_NE(successor.taken_over().find(std::to_string(child)), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(DirectoryLock::path_in(dir.string())));  // released at the end
  close(ready[0]);
  close(ready[1]);
}

TEST(DirectoryLock, TheSameSlurmJobAfterARequeueTakesItsLockOver) {
  const SlurmJobId job("4711");
  const fs::path dir = fresh_dir("requeue");
  write_record(dir, other("another-node", 99, "4711"));
  const auto start = Clock::now();
  const DirectoryLock lock(dir.string());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_NE(lock.taken_over().find("an earlier instance of this Slurm job"), std::string::npos);
}

TEST(DirectoryLock, ADeadPidOnThisHostIsStale) {
  const SlurmJobId no_job(nullptr);
  const fs::path dir = fresh_dir("dead_pid");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  write_record(dir, other(LockHolder::current().host, child, "12"));
  const DirectoryLock lock(dir.string());
  EXPECT_NE(lock.taken_over().find(std::to_string(child)), std::string::npos);
}

TEST(DirectoryLock, AnotherHostsRecordIsLiveWhileItsHeartbeatGoesOnAndStaleWhenItStops) {
  const SlurmJobId no_job(nullptr);
  const fs::path dir = fresh_dir("other_host");
  const std::string path = DirectoryLock::path_in(dir.string());
  write_record(dir, other("another-node", 99, "5"));
  std::atomic<bool> beating{true};
  std::thread heartbeat([&] {
    while (beating) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    }
  });
  const auto start = Clock::now();
  const std::string refused = input_error([&] { DirectoryLock second(dir.string()); });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(refused.find("host another-node pid 99 (Slurm job 5)"), std::string::npos) << refused;
  beating = false;
  heartbeat.join();

  const DirectoryLock lock(dir.string());
  EXPECT_NE(lock.taken_over().find("no heartbeat"), std::string::npos) << lock.taken_over();
}

}  // namespace
}  // namespace chimera::io
