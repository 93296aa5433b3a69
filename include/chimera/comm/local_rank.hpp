#pragma once
// The rank's index among the ranks of its node (the CUDA backend computes on device
// local_rank % devices). One rule for every caller: the launcher's word first, then MPI's view of
// shared memory (docs/slurm.md, docs/cuda.md).
#include <mpi.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::comm {

// Where a node-local rank can come from, in the order they are trusted. The MPI launchers'
// variables come before SLURM_LOCALID: under mpirun inside an allocation every rank inherits the
// batch step's SLURM_LOCALID, which says nothing about the rank.
inline constexpr std::array<std::string_view, 7> kLocalRankSources{
    "OMPI_COMM_WORLD_LOCAL_RANK",  // Open MPI
    "MV2_COMM_WORLD_LOCAL_RANK",   // MVAPICH
    "MPI_LOCALRANKID",             // MPICH (Hydra)
    "PMI_LOCAL_RANK",              // MPICH/Cray PMI
    "PALS_LOCAL_RANKID",           // Cray PALS mpiexec
    "SLURM_LOCALID",               // srun (only with SLURM_STEP_ID and no MPI launcher variable)
    "MPI_Comm_split_type",         // no launcher said: the rank among those sharing memory
};

struct NodeLocalRank {
  int rank = 0;
  int source = 0;  // index into kLocalRankSources
  std::string_view source_name() const { return kLocalRankSources.at(source); }
};

// Reads one environment variable (nullptr when unset); std::getenv, or a fake in tests.
using EnvLookup = std::function<const char*(const char*)>;

// The node-local rank the launcher gives this process, or nullopt when it gives none. A set but
// malformed value is an InputError naming the variable.
std::optional<NodeLocalRank> launcher_local_rank(const EnvLookup& env);

// The launcher's node-local rank, else this rank's index in MPI_Comm_split_type(SHARED).
// Collective over `world` (every rank splits, so that ranks that disagree on the source cannot
// hang).
NodeLocalRank node_local_rank(MPI_Comm world, const EnvLookup& env);

// Collective over `world`: every rank's node-local rank, in world rank order, on rank 0 (empty on
// the others).
std::vector<NodeLocalRank> gather_node_local_ranks(MPI_Comm world, const NodeLocalRank& mine);

// One log line, e.g. "node-local ranks (SLURM_LOCALID): 0 1 0 1"; each rank's source after its
// rank when they differ.
std::string describe_node_local_ranks(const std::vector<NodeLocalRank>& ranks);

// std::getenv as an EnvLookup.
const char* process_env(const char* name);

}  // namespace chimera::comm
