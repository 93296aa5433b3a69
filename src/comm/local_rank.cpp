#include "chimera/comm/local_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>

#include "chimera/comm/mpi.hpp"
#include "chimera/comm/node_comm.hpp"
#include "chimera/core/error.hpp"

namespace chimera::comm {

namespace {

constexpr int kSlurm = 5;
constexpr int kSharedMemory = 6;
static_assert(kLocalRankSources[kSlurm] == "SLURM_LOCALID");
static_assert(kLocalRankSources[kSharedMemory] == "MPI_Comm_split_type");

const char* set(const EnvLookup& env, std::string_view name) {
  const char* value = env(std::string(name).c_str());
  return value != nullptr && *value != '\0' ? value : nullptr;
}

NodeLocalRank parse(int source, const char* value) {
  const std::string_view text(value);
  int rank = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rank);
  CHIMERA_REQUIRE(error == std::errc() && end == text.data() + text.size() && rank >= 0,
                  "environment variable {}='{}' is not a node-local rank (a number >= 0)",
                  kLocalRankSources.at(source), text);
  return NodeLocalRank{rank, source};
}

}  // namespace

std::optional<NodeLocalRank> launcher_local_rank(const EnvLookup& env) {
  for (int source = 0; source < kSlurm; ++source) {
    if (const char* value = set(env, kLocalRankSources.at(source))) return parse(source, value);
  }
  // SLURM_LOCALID is the rank's own only in a step that srun started for it (SLURM_STEP_ID); in
  // the batch step it belongs to the script.
  if (set(env, "SLURM_STEP_ID") != nullptr) {
    if (const char* value = set(env, kLocalRankSources[kSlurm])) return parse(kSlurm, value);
  }
  return std::nullopt;
}

NodeLocalRank node_local_rank(MPI_Comm world, const EnvLookup& env) {
  const NodeComm node(world);
  return launcher_local_rank(env).value_or(NodeLocalRank{node.rank(), kSharedMemory});
}

std::vector<NodeLocalRank> gather_node_local_ranks(MPI_Comm world, const NodeLocalRank& mine) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const std::array<int, 2> sent{mine.rank, mine.source};
  std::vector<int> all(rank == 0 ? 2 * static_cast<std::size_t>(size) : 0);
  MPI_CHECK(MPI_Gather(sent.data(), 2, MPI_INT, all.data(), 2, MPI_INT, 0, world));
  std::vector<NodeLocalRank> ranks;
  for (std::size_t i = 0; i < all.size(); i += 2) ranks.push_back({all[i], all[i + 1]});
  return ranks;
}

std::string describe_node_local_ranks(const std::vector<NodeLocalRank>& ranks) {
  const bool one_source = std::all_of(ranks.begin(), ranks.end(), [&](const NodeLocalRank& r) {
    return r.source == ranks.front().source;
  });
  std::string line = "node-local ranks";
  if (one_source && !ranks.empty()) line += fmt::format(" ({})", ranks.front().source_name());
  line += ":";
  for (const NodeLocalRank& r : ranks) {
    line +=
        one_source ? fmt::format(" {}", r.rank) : fmt::format(" {} ({})", r.rank, r.source_name());
  }
  return line;
}

const char* process_env(const char* name) {
  return std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once at start-up
}

}  // namespace chimera::comm
