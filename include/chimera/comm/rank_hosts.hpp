#pragma once
// Which host each world rank runs on, so that a message about a lost peer can name its host
// ("rank 3 on host n2"). Gathered once at setup; on a single host nothing is added to messages.
#include <mpi.h>

#include <string>
#include <vector>

namespace chimera::comm {

// Every rank's host name (MPI_Get_processor_name), in world rank order. Collective over `world`.
std::vector<std::string> gather_host_names(MPI_Comm world);

// Remembers the table for host_of() (this process only).
void set_rank_hosts(std::vector<std::string> hosts);

// " on host NAME" for a world rank when the job spans more than one host, else "".
std::string on_host(int world_rank);

// " over ranks 0, 2 (hosts n1, n3)": the world ranks of `comm` and their hosts, for a collective
// that waits for all of them, when the job spans several hosts; else "". Local (no messages).
std::string ranks_and_hosts(MPI_Comm comm);

// The world ranks of `comm`'s members, in its rank order. Local (no messages).
std::vector<int> world_ranks_of(MPI_Comm comm);

// " (hosts n1, n3)": the distinct hosts of these world ranks, when the job spans several; else "".
std::string hosts_of_ranks(const std::vector<int>& world_ranks);

// " (hosts n1, n2, ...)": the job's hosts in rank order when there are several, else "". A
// collective cannot tell which of them stopped answering.
std::string job_hosts();

}  // namespace chimera::comm
