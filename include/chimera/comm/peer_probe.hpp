#pragma once
// Which peers of a stuck collective still answer. A collective that never completes cannot say
// which of its ranks is missing; before the watchdog ends the job, the rank probes each peer
// point-to-point on a communicator of its own, and every rank answers probes while it waits
// (comm::wait_until). A peer that does not answer within a short bound is the lost one (or
// blocked outside a wait). Nothing here blocks without a bound.
#include <mpi.h>

#include <string>
#include <vector>

namespace chimera::comm {

// How long a probe waits for the answers: long enough for a loaded TCP link, short beside the
// watchdog's 120 s, so that a lost host still ends the job within 3 minutes.
inline constexpr double kProbeAnswerS = 10.0;

// Makes the probe communicator (a duplicate of `world`; collective over it). Until then probes
// are neither answered nor sent.
void start_answering_probes(MPI_Comm world);

// Answers the probes that arrived (cheap when none did; at most every few milliseconds does it
// look). comm::wait_until calls it between tests.
void answer_probes();

// Probes the world ranks of `comm` other than this one and returns those that gave no answer
// within `answer_s`, answering others' probes meanwhile. Empty where probes were never started.
std::vector<int> silent_peers(MPI_Comm comm, double answer_s = kProbeAnswerS);

// "; rank 2 on host n3 answered no probe within 10 s" (or "; ranks 2, 3 (hosts n3) answered
// ...", or "; every rank answered a probe ..."), or "" where probes were never started.
std::string describe_silent_peers(MPI_Comm comm, double answer_s = kProbeAnswerS);

}  // namespace chimera::comm
