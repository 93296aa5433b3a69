#pragma once
// Logging. `info` is for the user's eyes and prints once (rank 0, or the only process);
// `info_all` prints on every rank with a rank prefix; `warn`/`error` go to stderr on the rank
// where they happen. Lines are written whole so ranks do not interleave mid-line.
#include <fmt/format.h>

#include <string_view>

namespace chimera::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

void set_level(Level level);
Level level();
// Called by the communicator layer once MPI is up; before that, the process counts as rank 0.
void set_rank(int rank, int world_size);
bool is_root();

void write_stdout(std::string_view line);
void write_stderr(std::string_view line);
// Without the rank prefix: for a message that every rank agreed on and rank 0 prints once.
void write_stderr_plain(std::string_view line);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Debug) write_stderr(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Info && is_root())
    write_stdout(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info_all(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Info) write_stdout(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Warn)
    write_stderr("warning: " + fmt::format(f, std::forward<Args>(args)...));
}
// A warning common to every rank (they agreed on it): one line, from rank 0, no rank prefix.
template <typename... Args>
void warn_once(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Warn && is_root()) {
    write_stderr_plain("warning: " + fmt::format(f, std::forward<Args>(args)...));
  }
}
// An error common to every rank (a bad configuration): one line, from rank 0, no rank prefix.
template <typename... Args>
void error_once(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Error && is_root()) {
    write_stderr_plain("error: " + fmt::format(f, std::forward<Args>(args)...));
  }
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Error)
    write_stderr("error: " + fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace chimera::log
