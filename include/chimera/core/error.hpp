#pragma once
// Errors and check macros. Three kinds of failure, three exit statuses:
//   InputError    - the user asked for something invalid (bad flag, config, file): exit status 2,
//                   one clear line naming what was wrong and what would be right.
//   DivergedError - training diverged (a non-finite loss or gradient norm): exit status 3, one
//                   line naming the step and the quantity; the last good checkpoint is kept.
//   Error         - a broken invariant inside Chimera (a bug) or a failing system call: status
//                   1, with file, line and rank so that a report from rank 1,873 can be traced.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace chimera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

class DivergedError : public Error {
 public:
  using Error::Error;
};

inline constexpr int kExitInternal = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitDiverged = 3;

// Exit status for an exception escaping a subcommand: 2 for bad input, 3 for divergence, 1
// otherwise.
int exit_status(const std::exception& e);

namespace detail {
[[noreturn]] void fail_check(const char* file, int line, const char* expr, const std::string& msg);
[[noreturn]] void fail_input(const std::string& msg);
}  // namespace detail

// Message prefix "[rank r] " once the communicator layer has told core which rank this is.
std::string rank_prefix();
void set_process_rank(int rank);
int process_rank();  // -1 before MPI is set up

}  // namespace chimera

// Internal invariant: throws chimera::Error with file:line, the failed expression and a message.
#define CHIMERA_CHECK(cond, ...)                                                            \
  do {                                                                                      \
    if (!(cond)) [[unlikely]] {                                                             \
      ::chimera::detail::fail_check(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
    }                                                                                       \
  } while (0)

// User input rule: throws chimera::InputError (exit status 2) with the message alone.
#define CHIMERA_REQUIRE(cond, ...)                               \
  do {                                                           \
    if (!(cond)) [[unlikely]] {                                  \
      ::chimera::detail::fail_input(::fmt::format(__VA_ARGS__)); \
    }                                                            \
  } while (0)
