#include "chimera/comm/peer_probe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

namespace {

constexpr int kPingTag = 1;
constexpr int kAnswerTag = 2;
// How often a waiting rank looks for probes: well inside the prober's bound, rare beside the
// wait's own tests.
constexpr double kAnswerEveryS = 0.005;

struct ProbeState {
  MPI_Comm comm = MPI_COMM_NULL;
  double last_look_s = 0.0;
  int token = 0;  // payload of pings and answers
};

ProbeState& state() {
  static ProbeState s;
  return s;
}

// Receives every ping that arrived and answers it. Errors (a peer whose host is gone) are not
// this rank's to report here: the call fails quietly and the prober hears nothing.
void answer_now() {
  ProbeState& s = state();
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, s.comm, &pending, &status) != MPI_SUCCESS ||
        pending == 0)
      return;
    int ping = 0;
    if (MPI_Recv(&ping, 1, MPI_INT, status.MPI_SOURCE, kPingTag, s.comm, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
      return;
    MPI_Request answer = MPI_REQUEST_NULL;
    if (MPI_Isend(&s.token, 1, MPI_INT, status.MPI_SOURCE, kAnswerTag, s.comm, &answer) ==
        MPI_SUCCESS)
      MPI_Request_free(&answer);  // a one-int message; it completes on its own
  }
}

}  // namespace

void start_answering_probes(MPI_Comm world) {
  ProbeState& s = state();
  if (s.comm != MPI_COMM_NULL) return;
  MPI_CHECK(MPI_Comm_dup(world, &s.comm));
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
}

void answer_probes() {
  ProbeState& s = state();
  if (s.comm == MPI_COMM_NULL) return;
  const double now = now_seconds();
  if (now - s.last_look_s < kAnswerEveryS) return;
  s.last_look_s = now;
  answer_now();
}

std::vector<int> silent_peers(MPI_Comm comm, double answer_s) {
  ProbeState& s = state();
  if (s.comm == MPI_COMM_NULL || comm == MPI_COMM_NULL) return {};
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> peers = world_ranks_of(comm);
  std::erase(peers, me);
  // The probe communicator duplicates the world: its ranks are world ranks.
  std::vector<MPI_Request> answers(peers.size(), MPI_REQUEST_NULL);
  std::vector<int> replies(peers.size(), 0);
  std::vector<bool> answered(peers.size(), false);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    MPI_Request ping = MPI_REQUEST_NULL;
    if (MPI_Isend(&s.token, 1, MPI_INT, peers[i], kPingTag, s.comm, &ping) == MPI_SUCCESS)
      MPI_Request_free(&ping);
    if (MPI_Irecv(&replies[i], 1, MPI_INT, peers[i], kAnswerTag, s.comm, &answers[i]) !=
        MPI_SUCCESS)
      answers[i] = MPI_REQUEST_NULL;
  }
  const double until = now_seconds() + answer_s;
  std::size_t waiting = peers.size();
  while (waiting > 0 && now_seconds() < until) {
    answer_now();  // other survivors probe at the same time
    for (std::size_t i = 0; i < peers.size(); ++i) {
      if (answered[i] || answers[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      if (MPI_Test(&answers[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        answers[i] = MPI_REQUEST_NULL;  // the peer is unreachable: it stays silent
        continue;
      }
      if (done != 0) {
        answered[i] = true;
        --waiting;
      }
    }
    sleep_seconds(0.001);
  }
  std::vector<int> silent;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (answered[i]) continue;
    silent.push_back(peers[i]);
    if (answers[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&answers[i]);
      MPI_Request_free(&answers[i]);
    }
  }
  return silent;
}

std::string describe_silent_peers(MPI_Comm comm, double answer_s) {
  if (state().comm == MPI_COMM_NULL || comm == MPI_COMM_NULL) return "";
  const std::vector<int> silent = silent_peers(comm, answer_s);
  if (silent.empty()) return fmt::format("; every rank answered a probe within {:.0f} s", answer_s);
  if (silent.size() == 1)
    return fmt::format("; rank {}{} answered no probe within {:.0f} s", silent.front(),
                       on_host(silent.front()), answer_s);
  return fmt::format("; ranks {}{} answered no probe within {:.0f} s", fmt::join(silent, ", "),
                     hosts_of_ranks(silent), answer_s);
}

}  // namespace chimera::comm
