#pragma once
// Setup steps that may fail on some ranks only (a file missing on one node, a config that
// differs) must still end every rank cleanly, with one message, and no rank left waiting in a
// collective. `all_or_none` runs a step on every rank, then agrees: if any rank failed, every
// rank throws the same AgreedError carrying the lowest failing rank's message and exit status.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"

namespace chimera::comm {

class AgreedError : public Error {
 public:
  AgreedError(const std::string& message, int status, int failed_rank)
      : Error(message), status_(status), failed_rank_(failed_rank) {}
  int status() const { return status_; }
  int failed_rank() const { return failed_rank_; }

 private:
  int status_;
  int failed_rank_;
};

void all_or_none(MPI_Comm comm, const std::function<void()>& step);
// The same with the agreement awaited as a wait (comm::wait): watched by the watchdog, which
// names `label`, and answering the probes of a peer stuck elsewhere. For steps a lost host can
// interrupt mid-run (a checkpoint's collective phases), where a blocking agreement would hold
// the survivors without saying whom they wait for.
void all_or_none(MPI_Comm comm, const std::function<void()>& step, const WaitPolicy& policy,
                 const WaitLabel& label);

// `text` on every rank as `root` holds it. Collective over `comm`.
std::string broadcast(MPI_Comm comm, const std::string& text, int root);

// Where a value must be the same on every rank: the lowest rank whose `value` differs from rank
// 0's, with both values, known to every rank; nullopt where all ranks hold rank 0's value.
struct Difference {
  int rank = 0;
  std::string root_value;  // rank 0's
  std::string value;       // that rank's
};
std::optional<Difference> first_difference(MPI_Comm comm, const std::string& value);

// InputError on every rank if any rank's configuration hash differs from rank 0's.
void check_same_config(MPI_Comm comm, std::uint64_t config_hash);

}  // namespace chimera::comm
