#include "chimera/io/directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "chimera/core/error.hpp"

namespace chimera::io {

namespace {

constexpr const char* kLockName = "chimera.lock";

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string read_record(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The file's modification time, or nullopt when it is gone.
std::optional<timespec> mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_mtim;
}

bool same_time(const std::optional<timespec>& a, const std::optional<timespec>& b) {
  return a.has_value() == b.has_value() &&
         (!a || (a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec));
}

bool local_pid_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

Flock try_flock(int fd) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Flock::Taken;
  return errno == EWOULDBLOCK ? Flock::Held : Flock::Unsupported;
}

}  // namespace

std::string LockHolder::describe() const {
  return fmt::format("host {} pid {}{} since {}", host, pid,
                     slurm_job.empty() ? "" : fmt::format(" (Slurm job {})", slurm_job), started);
}

std::string LockHolder::record() const {
  return fmt::format("host={} pid={} slurm_job={} started={}", host, pid,
                     slurm_job.empty() ? "-" : slurm_job, started);
}

LockHolder LockHolder::parse(const std::string& line) {
  LockHolder h;
  std::istringstream in(line);
  std::string field;
  while (in >> field) {
    const auto eq = field.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "host") h.host = value;
    if (key == "pid") h.pid = std::strtol(value.c_str(), nullptr, 10);
    if (key == "slurm_job" && value != "-") h.slurm_job = value;
    if (key == "started") h.started = value;
  }
  return h;
}

LockHolder LockHolder::current() {
  LockHolder h;
  h.host = host_name();
  h.pid = static_cast<long>(::getpid());
  if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr) h.slurm_job = job;
  h.started = utc_now();
  return h;
}

// Touches the record every kHeartbeatPeriod, so that a run on another host sees the holder is
// alive without flock. A plain thread: no MPI, no HDF5.
struct DirectoryLock::Heartbeat {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  explicit Heartbeat(int fd) {
    thread = std::thread([this, fd] {
      std::unique_lock lock(mutex);
      while (!wake.wait_for(lock, kHeartbeatPeriod, [this] { return stop; }))
        ::futimens(fd, nullptr);
    });
  }
  ~Heartbeat() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
    }
    wake.notify_all();
    thread.join();
  }
};

struct DirectoryLock::Held {
  std::string path;
  int fd = -1;
  std::unique_ptr<Heartbeat> heartbeat;
  ~Held();  // removes the record and releases the lock
};

std::string DirectoryLock::path_in(const std::string& dir) {
  return (std::filesystem::path(dir) / kLockName).string();
}

std::string stale_lock_reason(const LockHolder& holder, const LockHolder& me, Flock flock,
                              const std::function<bool(long)>& pid_alive,
                              const std::function<bool()>& heartbeat_seen) {
  if (!me.slurm_job.empty() && holder.slurm_job == me.slurm_job)
    return "an earlier instance of this Slurm job";
  if (holder.host == me.host) {
    if (flock == Flock::Taken) return "its lock was released with its process";
    if (flock == Flock::Unsupported && !pid_alive(holder.pid)) return "its process is gone";
    return {};
  }
  // Another host. A flock held there is a live holder where the file system shares flocks; a
  // taken one proves nothing where flocks are node-local: the heartbeat decides.
  if (flock == Flock::Held || heartbeat_seen()) return {};
  return fmt::format("no heartbeat for {} s", std::chrono::seconds(DirectoryLock::kWatch).count());
}

// Takes the lock of `dir` for this process (the rules above); `taken_over` says whose stale lock
// it replaced.
std::shared_ptr<DirectoryLock::Held> DirectoryLock::acquire(const std::string& dir,
                                                            std::string& taken_over) {
  auto h = std::make_shared<Held>();
  h->path = path_in(dir);
  const LockHolder me = LockHolder::current();
  Flock flock = Flock::Unsupported;
  // A holder that ends unlinks the file before closing it: a lock taken on an unlinked file is
  // no lock, so open again until the file locked is the one the path names.
  for (;;) {
    h->fd = ::open(h->path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    CHIMERA_REQUIRE(h->fd >= 0, "{}: cannot open the checkpoint directory's lock: {}", h->path,
                    std::strerror(errno));
    flock = try_flock(h->fd);
    struct stat opened {
    }, named{};
    if (::fstat(h->fd, &opened) == 0 && ::stat(h->path.c_str(), &named) == 0 &&
        opened.st_ino == named.st_ino && opened.st_dev == named.st_dev)
      break;
    ::close(h->fd);
  }
  const auto refuse = [&](const std::string& message) {
    ::close(h->fd);
    h->fd = -1;
    throw InputError(message);
  };
  const std::string line = read_record(h->path);
  if (!line.empty()) {
    const LockHolder holder = LockHolder::parse(line);
    const auto heartbeat_seen = [&] {
      const auto first = mtime(h->path);
      const auto until = std::chrono::steady_clock::now() + kWatch;
      while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        if (!same_time(first, mtime(h->path))) return true;
      }
      return false;
    };
    const std::string stale = stale_lock_reason(holder, me, flock, local_pid_alive, heartbeat_seen);
    if (stale.empty())
      refuse(
          fmt::format("{} is in use by another run: {}; one job per checkpoint directory (wait "
                      "for it to end, or give this run another --save-dir)",
                      dir, holder.describe()));
    taken_over = fmt::format("{} ({})", holder.describe(), stale);
  } else if (flock == Flock::Held) {
    // A holder between creating the file and writing its record: it is alive.
    refuse(fmt::format(
        "{} is in use by another run that is starting; one job per checkpoint directory", dir));
  }
  const std::string record = me.record() + "\n";
  const bool written =
      ::ftruncate(h->fd, 0) == 0 &&
      ::pwrite(h->fd, record.data(), record.size(), 0) == static_cast<ssize_t>(record.size()) &&
      ::fsync(h->fd) == 0;
  if (!written)
    refuse(fmt::format("{}: cannot write the lock record: {}", h->path, std::strerror(errno)));
  h->heartbeat = std::make_unique<Heartbeat>(h->fd);
  return h;
}

DirectoryLock::DirectoryLock(const std::string& dir) {
  // A process holds a directory's lock once: trainers made one after another in one process
  // (tests, a library user) share it, and it is released with the last of them.
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<Held>> held_here;
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path_in(dir), ec).string();
  const std::lock_guard lock(mutex);
  held_ = held_here[key].lock();
  if (held_) return;
  held_ = acquire(dir, taken_over_);
  held_here[key] = held_;
}

DirectoryLock::~DirectoryLock() = default;

DirectoryLock::Held::~Held() {
  heartbeat.reset();
  if (fd < 0) return;
  // The record goes before the flock, so that no one takes over a lock whose record says we hold
  // it; a crash leaves the record, which the rules above recognise as stale.
  ::unlink(path.c_str());
  ::close(fd);
}

}  // namespace chimera::io
