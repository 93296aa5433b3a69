#include "chimera/comm/agreement.hpp"

#include <climits>
#include <exception>
#include <vector>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

void all_or_none(MPI_Comm comm, const std::function<void()>& step) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string message;
  int status = 0;
  try {
    step();
  } catch (const AgreedError&) {
    throw;  // already agreed by a nested step: every rank is leaving together
  } catch (const std::exception& e) {
    message = e.what();
    status = exit_status(e);
  }
  int first_failed = status != 0 ? rank : INT_MAX;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm));
  if (first_failed == INT_MAX) return;

  // Broadcast the first failing rank's status and message to everyone.
  int header[2] = {status, static_cast<int>(message.size())};
  MPI_CHECK(MPI_Bcast(header, 2, MPI_INT, first_failed, comm));
  std::vector<char> text(static_cast<std::size_t>(header[1]));
  if (rank == first_failed) text.assign(message.begin(), message.end());
  if (header[1] > 0) MPI_CHECK(MPI_Bcast(text.data(), header[1], MPI_CHAR, first_failed, comm));
  throw AgreedError(std::string(text.begin(), text.end()), header[0], first_failed);
}

void check_same_config(MPI_Comm comm, std::uint64_t config_hash) {
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  unsigned long long root_hash = config_hash;
  MPI_CHECK(MPI_Bcast(&root_hash, 1, MPI_UNSIGNED_LONG_LONG, 0, comm));
  all_or_none(comm, [&] {
    CHIMERA_REQUIRE(root_hash == config_hash,
                    "the run configuration differs across ranks (hash {:016x} here, {:016x} on "
                    "rank 0): give every rank the same --config file and --set overrides",
                    static_cast<unsigned long long>(config_hash), root_hash);
  });
}

}  // namespace chimera::comm
