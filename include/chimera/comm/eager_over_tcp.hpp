#pragma once
// Over TCP, UCX (Open MPI's default transport) sends a message above its rendezvous threshold
// (16 KiB between hosts, as `chimera bench p2p` measures it) only once the sender's MPI calls see
// the receiver's answer; a stage computing between its blocks makes none, so its activations
// and gradients would wait for its next block or op (measured on emulated hosts: 256 KiB
// messages 15-30 ms late over a 2 ms link). Sent eagerly, a message moves at once, whatever the
// sender does next. On RDMA networks the receiver reads a rendezvous message itself, and UCX's
// choice stands.
#include <string>

#include "chimera/comm/local_rank.hpp"

namespace chimera::comm {

// Whether to send eagerly: the user has not set UCX_RNDV_THRESH, the job spans several hosts (the
// launcher says so: Slurm's SLURM_STEP_NUM_NODES, Open MPI's OMPI_COMM_WORLD_SIZE against
// OMPI_COMM_WORLD_LOCAL_SIZE) and this host has no RDMA device (none under `rdma_devices`).
bool eager_over_tcp_wanted(const EnvLookup& env, const char* rdma_devices);

// Called before MPI_Init: sets UCX_RNDV_THRESH=inf where eager_over_tcp_wanted. Returns the line
// to log when it did, else an empty string.
std::string send_eagerly_over_tcp(const char* rdma_devices = "/sys/class/infiniband");

}  // namespace chimera::comm
