#include "collective.hpp"

#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"

namespace chimera::io {

namespace {
CollectiveWait& installed_wait() {
  static CollectiveWait wait;
  return wait;
}
}  // namespace

void set_collective_wait(CollectiveWait wait) {
  installed_wait() = std::move(wait);
}

}  // namespace chimera::io

namespace chimera::io::detail {

namespace {
void mpi_check(int status, const char* what) {
  CHIMERA_CHECK(status == MPI_SUCCESS, "{} failed (MPI error {})", what, status);
}

// Every collective here is started non-blocking and awaited by the installed wait, or MPI_Wait.
void finish(int started, MPI_Request& request, MPI_Comm comm, const char* what) {
  mpi_check(started, what);
  if (const CollectiveWait& wait = installed_wait()) {
    wait(request, comm);
  } else {
    mpi_check(MPI_Wait(&request, MPI_STATUS_IGNORE), what);
  }
}
}  // namespace

Collective::Collective(MPI_Comm comm) : comm_(comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized != 0 && finalized == 0) {
    mpi_check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  }
}

void Collective::broadcast(std::int64_t& value) const {
  MPI_Request r = MPI_REQUEST_NULL;
  if (parallel()) finish(MPI_Ibcast(&value, 1, MPI_INT64_T, 0, comm_, &r), r, comm_, "MPI_Ibcast");
}

void Collective::broadcast(std::string& text) const {
  if (!parallel()) return;
  auto length = static_cast<std::int64_t>(text.size());
  broadcast(length);
  text.resize(static_cast<std::size_t>(length));
  // Large texts go in pieces that fit MPI's int counts.
  constexpr std::int64_t kPiece = std::int64_t{1} << 30;
  for (std::int64_t at = 0; at < length; at += kPiece) {
    const auto count = static_cast<int>(std::min(kPiece, length - at));
    MPI_Request r = MPI_REQUEST_NULL;
    finish(MPI_Ibcast(text.data() + at, count, MPI_CHAR, 0, comm_, &r), r, comm_, "MPI_Ibcast");
  }
}

void Collective::sum(std::vector<int>& values) const {
  MPI_Request r = MPI_REQUEST_NULL;
  if (parallel() && !values.empty())
    finish(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT,
                          MPI_SUM, comm_, &r),
           r, comm_, "MPI_Iallreduce");
}

std::int64_t Collective::min(std::int64_t value) const {
  MPI_Request r = MPI_REQUEST_NULL;
  if (parallel())
    finish(MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MIN, comm_, &r), r, comm_,
           "MPI_Iallreduce");
  return value;
}

std::uint64_t Collective::max(std::uint64_t value) const {
  MPI_Request r = MPI_REQUEST_NULL;
  if (parallel())
    finish(MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_UINT64_T, MPI_MAX, comm_, &r), r, comm_,
           "MPI_Iallreduce");
  return value;
}

void Collective::agree(const std::string& local_failure, bool input_error) const {
  const std::int64_t first_failing =
      min(local_failure.empty() ? std::int64_t{size_} : std::int64_t{rank_});
  if (first_failing == size_) return;
  std::string message = local_failure;
  if (parallel()) {
    // Broadcast from the first failing rank: make it the root of a one-off broadcast.
    auto length = static_cast<std::int64_t>(message.size());
    const int root = static_cast<int>(first_failing);
    MPI_Request r = MPI_REQUEST_NULL;
    finish(MPI_Ibcast(&length, 1, MPI_INT64_T, root, comm_, &r), r, comm_, "MPI_Ibcast");
    message.resize(static_cast<std::size_t>(length));
    finish(MPI_Ibcast(message.data(), static_cast<int>(length), MPI_CHAR, root, comm_, &r), r,
           comm_, "MPI_Ibcast");
  }
  if (input_error) throw InputError(message);
  throw Error(message);
}

}  // namespace chimera::io::detail
