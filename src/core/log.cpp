#include "chimera/core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "chimera/core/error.hpp"

namespace chimera::log {

namespace {

// Before MPI is initialised (flag parsing, config errors) the launcher's environment tells which
// rank this process will be, so that an error common to all ranks is printed once, by rank 0.
int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

std::atomic<Level> g_level{Level::Info};
std::atomic<int> g_rank{launcher_rank()};
std::atomic<int> g_world{1};

// One write(2) per line: whole lines from concurrent ranks never interleave.
void write_line(int fd, std::string_view prefix, std::string_view line) {
  std::string buf;
  buf.reserve(prefix.size() + line.size() + 1);
  buf.append(prefix).append(line);
  if (buf.empty() || buf.back() != '\n') buf.push_back('\n');
  std::size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::write(fd, buf.data() + done, buf.size() - done);
    if (n <= 0) return;  // nowhere left to report a failing stdout
    done += static_cast<std::size_t>(n);
  }
}
}  // namespace

void set_level(Level l) {
  g_level.store(l);
}
Level level() {
  return g_level.load();
}

void set_rank(int rank, int world_size) {
  g_rank.store(rank);
  g_world.store(world_size);
  set_process_rank(world_size > 1 ? rank : -1);
}

bool is_root() {
  return g_rank.load() == 0;
}

void write_stdout(std::string_view line) {
  write_line(STDOUT_FILENO, g_world.load() > 1 && !is_root() ? rank_prefix() : "", line);
}
void write_stderr_plain(std::string_view line) { write_line(STDERR_FILENO, "", line); }

void write_stderr(std::string_view line) {
  write_line(STDERR_FILENO, g_world.load() > 1 ? rank_prefix() : "", line);
}

}  // namespace chimera::log
