#include "chimera/comm/agreement.hpp"

#include <fmt/format.h>
#include <climits>
#include <exception>
#include <vector>

#include "chimera/comm/mpi.hpp"

namespace chimera::comm {

std::string broadcast(MPI_Comm comm, const std::string& text, int root) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int size = static_cast<int>(text.size());
  MPI_CHECK(MPI_Bcast(&size, 1, MPI_INT, root, comm));
  std::vector<char> chars(text.begin(), text.end());
  chars.resize(static_cast<std::size_t>(size));
  if (size > 0) MPI_CHECK(MPI_Bcast(chars.data(), size, MPI_CHAR, root, comm));
  return rank == root ? text : std::string(chars.begin(), chars.end());
}

namespace {

// all_or_none's agreement: blocking without a policy, else a watched wait.
void agree(MPI_Comm comm, const std::function<void()>& step, const WaitPolicy* policy,
           const WaitLabel& label) {
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
  if (policy == nullptr) {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm));
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm, &request));
    wait(request, *policy, nullptr, nullptr, nullptr, label);
  }
  if (first_failed == INT_MAX) return;

  // The first failing rank's status and message, to everyone (every rank is here by now).
  MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, first_failed, comm));
  throw AgreedError(broadcast(comm, message, first_failed), status, first_failed);
}

}  // namespace

void all_or_none(MPI_Comm comm, const std::function<void()>& step) {
  agree(comm, step, nullptr, {});
}

void all_or_none(MPI_Comm comm, const std::function<void()>& step, const WaitPolicy& policy,
                 const WaitLabel& label) {
  agree(comm, step, &policy, label);
}

std::optional<Difference> first_difference(MPI_Comm comm, const std::string& value) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::string root_value = broadcast(comm, value, 0);
  int first = value != root_value ? rank : INT_MAX;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return std::nullopt;
  return Difference{first, root_value, broadcast(comm, value, first)};
}

void check_same_config(MPI_Comm comm, std::uint64_t config_hash) {
  const auto difference =
      first_difference(comm, fmt::format("{:016x}", static_cast<unsigned long long>(config_hash)));
  if (!difference) return;
  const InputError error(fmt::format(
      "the run configuration differs across ranks (hash {} on rank {}, {} on rank 0): give every "
      "rank the same --config file and --set overrides",
      difference->value, difference->rank, difference->root_value));
  throw AgreedError(error.what(), exit_status(error), difference->rank);
}

}  // namespace chimera::comm
