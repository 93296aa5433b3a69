#pragma once
// One job per checkpoint directory. A run that saves into a directory holds `DIR/chimera.lock`
// for its lifetime: a one-line record naming the holder (host, pid, Slurm job id, start time),
// an exclusive flock(2) on it, and a heartbeat (the holder touches the file every
// kHeartbeatPeriod). A second run finds a live holder and is refused; a lock left by a dead job
// is recognised and taken over (docs/checkpoints.md, "One job per checkpoint directory"):
//
// - the same Slurm job id as this run's: a requeued job's earlier instance (Slurm runs one
//   instance of a job id at a time, and starts the requeued one after the earlier has ended);
// - the same host: the kernel's flock decides (dropped with the holder's process), or, where the
//   file system has no flock, a pid that no longer runs;
// - another host: no heartbeat for kWatch (the holder touches the file every kHeartbeatPeriod;
//   this needs neither flock nor synchronised clocks, only an mtime the file system updates).
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace chimera::io {

struct LockHolder {
  std::string host;
  long pid = 0;
  std::string slurm_job;  // "" outside Slurm
  std::string started;    // UTC, ISO 8601

  std::string describe() const;  // "host n1 pid 4242 (Slurm job 17) since 2026-12-06T00:40:00Z"
  std::string record() const;    // the file's line
  static LockHolder parse(const std::string& line);
  static LockHolder current();  // this process
};

// flock(2)'s answer on the lock file: taken by this process, held by another open file, or not
// offered by the file system (ENOSYS, EOPNOTSUPP, ENOLCK: Lustre without -o flock, some NFS).
enum class Flock { Taken, Held, Unsupported };

// The rules above: why `holder`'s lock is stale ("" while it is live), as `me` sees it.
// `pid_alive` asks this host about a pid; `heartbeat_seen` watches the file for kWatch.
std::string stale_lock_reason(const LockHolder& holder, const LockHolder& me, Flock flock,
                              const std::function<bool(long)>& pid_alive,
                              const std::function<bool()>& heartbeat_seen);

class DirectoryLock {
 public:
  static constexpr auto kHeartbeatPeriod = std::chrono::seconds(2);
  static constexpr auto kWatch = std::chrono::seconds(7);

  // Takes the lock of `dir` (which exists) for this process, taking over a stale one (`taken_over`
  // then says whose, for the log). InputError naming the holder when a live run holds it. Locks
  // of one directory in one process share one lock, released (the record removed) with the last.
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  const std::string& taken_over() const { return taken_over_; }
  static std::string path_in(const std::string& dir);

 private:
  struct Heartbeat;
  struct Held;
  static std::shared_ptr<Held> acquire(const std::string& dir, std::string& taken_over);

  std::shared_ptr<Held> held_;
  std::string taken_over_;
};

}  // namespace chimera::io
