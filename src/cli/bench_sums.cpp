// `chimera bench sums`: gradient sums posted together on sub-communicators, as an iteration's
// stage and tied-table sums are, timed, and set beside the simulator's price for the same sums
// from a common start (schedule::concurrent_sums_end). It checks the model's rules for sums that
// share hosts' links (libnbc's trees, one connection's messages in turn, max-min fair flows) on
// the network at hand, as `bench p2p` measures alpha and beta. Run under mpiexec or srun.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_commands.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/plan/network.hpp"
#include "chimera/plan/predict.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::cli {

namespace {

struct SumsFlags {
  std::vector<std::string> sums;  // "BYTES:RANKS"
  std::string network;            // empty: no model column
  int repeats = 5;
};

int parse_int(std::string_view text, std::string_view what, std::string_view spec) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  CHIMERA_REQUIRE(error == std::errc{} && end == text.data() + text.size(),
                  "--sum {}: {} '{}' is not an integer below 2^31", spec, what, text);
  return value;
}

// "BYTES:RANKS", RANKS a comma list of world ranks and ranges "a-b", in the communicator's order.
schedule::SumGroup parse_sum(const std::string& spec, int world_size) {
  const auto colon = spec.find(':');
  CHIMERA_REQUIRE(colon != std::string::npos,
                  "--sum {}: give BYTES:RANKS, e.g. 12582912:0,4,8,12 or 4194304:0-3", spec);
  schedule::SumGroup g;
  const int bytes = parse_int(std::string_view(spec).substr(0, colon), "BYTES", spec);
  CHIMERA_REQUIRE(bytes >= 4 && bytes % 4 == 0,
                  "--sum {}: BYTES must be a positive multiple of 4 (float32 values)", spec);
  g.bytes = bytes;
  std::string_view rest = std::string_view(spec).substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto dash = item.find('-', 1);
    const int first = parse_int(item.substr(0, dash), "rank", spec);
    const int last =
        dash == std::string_view::npos ? first : parse_int(item.substr(dash + 1), "rank", spec);
    CHIMERA_REQUIRE(first <= last, "--sum {}: range {} runs backwards", spec, item);
    for (int r = first; r <= last; ++r) {
      CHIMERA_REQUIRE(r >= 0 && r < world_size, "--sum {}: rank {} is not one of the {} ranks",
                      spec, r, world_size);
      CHIMERA_REQUIRE(std::find(g.ranks.begin(), g.ranks.end(), r) == g.ranks.end(),
                      "--sum {}: rank {} is listed twice", spec, r);
      g.ranks.push_back(r);
    }
  }
  CHIMERA_REQUIRE(!g.ranks.empty(), "--sum {}: no ranks", spec);
  return g;
}

// Each world rank's host as 0, 1, ... in the order the hosts first appear; and how many.
std::pair<std::vector<int>, int> host_indices(const std::vector<std::string>& names) {
  std::map<std::string, int> index;
  std::vector<int> host_of;
  for (const std::string& name : names) {
    const auto [it, added] = index.try_emplace(name, static_cast<int>(index.size()));
    host_of.push_back(it->second);
  }
  return {host_of, static_cast<int>(index.size())};
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One repeat: every rank posts its sums in the order given, then tests them (sleeping briefly
// between rounds, as the runtime's waits do) until all have ended. Each sum's end, in seconds
// after a common barrier, as the last of its ranks saw it (rank 0 only).
std::vector<double> time_sums_once(const std::vector<schedule::SumGroup>& groups,
                                   const std::vector<MPI_Comm>& comms,
                                   std::vector<std::vector<float>>& buffers) {
  const std::size_t k = groups.size();
  std::vector<MPI_Request> requests(k, MPI_REQUEST_NULL);
  std::vector<double> ended(k, 0.0);
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  const double t0 = now_seconds();
  int left = 0;
  for (std::size_t i = 0; i < k; ++i) {
    if (comms[i] == MPI_COMM_NULL) continue;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffers[i].data(), static_cast<int>(buffers[i].size()),
                             MPI_FLOAT, MPI_SUM, comms[i], &requests[i]));
    ++left;
  }
  while (left > 0) {
    for (std::size_t i = 0; i < k; ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_CHECK(MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE));
      if (done != 0) {
        ended[i] = now_seconds() - t0;
        --left;
      }
    }
    if (left > 0) sleep_seconds(50e-6);
  }
  for (auto& b : buffers) std::fill(b.begin(), b.end(), 1.0F);  // keep the values finite
  std::vector<double> last(k, 0.0);
  MPI_CHECK(MPI_Reduce(ended.data(), last.data(), static_cast<int>(k), MPI_DOUBLE, MPI_MAX, 0,
                       MPI_COMM_WORLD));
  return last;
}

// Whether two ranks of one host take part in the sums: only then does the later-rank weight
// (schedule::Costs::later_rank_weight) change the model's price.
bool shares_a_host(const std::vector<schedule::SumGroup>& groups, const std::vector<int>& host_of) {
  std::map<int, int> rank_on_host;
  for (const auto& g : groups) {
    for (const int r : g.ranks) {
      const auto [it, added] = rank_on_host.try_emplace(host_of[static_cast<std::size_t>(r)], r);
      if (it->second != r) return true;
    }
  }
  return false;
}

constexpr double kLightest = 0.05;

// The model's last end with later ranks weighing `weight`.
double last_end(const std::vector<schedule::SumGroup>& groups, const std::vector<int>& host_of,
                schedule::Costs costs, double weight) {
  costs.later_rank_weight = weight;
  const std::vector<double> ends = schedule::concurrent_sums_end(groups, host_of, costs);
  return *std::max_element(ends.begin(), ends.end());
}

// Whether the weight changes the model's price at all: not where the ranks sharing a host never
// cross a link at once (all on one host, say).
bool weight_matters(const std::vector<schedule::SumGroup>& groups, const std::vector<int>& host_of,
                    const schedule::Costs& costs) {
  return last_end(groups, host_of, costs, 1.0) != last_end(groups, host_of, costs, kLightest);
}

// The later-rank weight at which the model's last sum ends at `measured_ms` (bisection: the
// lighter the later ranks, the sooner the sums end), within [kLightest, 1].
double fitted_later_rank_weight(const std::vector<schedule::SumGroup>& groups,
                                const std::vector<int>& host_of, const schedule::Costs& costs,
                                double measured_ms) {
  const auto end_at = [&](double weight) { return last_end(groups, host_of, costs, weight); };
  if (end_at(1.0) <= measured_ms) return 1.0;
  if (end_at(kLightest) >= measured_ms) return kLightest;
  double lighter = kLightest, heavier = 1.0;
  for (int i = 0; i < 30; ++i) {
    const double mid = (lighter + heavier) / 2;
    (end_at(mid) > measured_ms ? heavier : lighter) = mid;
  }
  return (lighter + heavier) / 2;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ","));
}

int run_sums(const SumsFlags& f) {
  const comm::MpiSession mpi(nullptr, nullptr);
  CHIMERA_REQUIRE(!f.sums.empty(),
                  "bench sums: give at least one --sum BYTES:RANKS, e.g. --sum 12582912:0,4,8,12");
  CHIMERA_REQUIRE(f.repeats >= 1, "--repeats {}: must be at least 1", f.repeats);
  std::vector<schedule::SumGroup> groups;
  for (const std::string& spec : f.sums) groups.push_back(parse_sum(spec, mpi.size()));
  const bool model = !f.network.empty();
  const plan::Network network = model ? plan::parse_network(f.network) : plan::Network{};
  const auto [host_of, hosts] = host_indices(comm::gather_host_names(MPI_COMM_WORLD));

  std::vector<MPI_Comm> comms(groups.size(), MPI_COMM_NULL);
  std::vector<std::vector<float>> buffers(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& ranks = groups[i].ranks;
    const auto at = std::find(ranks.begin(), ranks.end(), mpi.rank());
    const bool member = at != ranks.end();
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED,
                             member ? static_cast<int>(at - ranks.begin()) : 0, &comms[i]));
    if (member) buffers[i].assign(static_cast<std::size_t>(groups[i].bytes) / 4, 1.0F);
  }

  if (mpi.rank() == 0) {
    log::info(
        "sums: {} posted at once by their ranks (MPI_Iallreduce in place, in the order given), "
        "timed {} times after one that opens the connections; {} ranks on {} host{}",
        groups.size(), f.repeats, mpi.size(), hosts, hosts == 1 ? "" : "s");
  }
  std::vector<std::vector<double>> measured(groups.size() + 1);  // [sum, then all] ms per repeat
  for (int rep = 0; rep <= f.repeats; ++rep) {
    const std::vector<double> ends = time_sums_once(groups, comms, buffers);
    if (rep == 0 || mpi.rank() != 0) continue;
    for (std::size_t i = 0; i < ends.size(); ++i) measured[i].push_back(ends[i] * 1e3);
    measured.back().push_back(*std::max_element(ends.begin(), ends.end()) * 1e3);
  }
  for (MPI_Comm& c : comms) {
    if (c != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&c));
  }
  if (mpi.rank() != 0) return 0;

  std::vector<double> predicted;
  schedule::Costs costs;
  plan::apply_network(network, costs);
  if (model) {
    predicted = schedule::concurrent_sums_end(groups, host_of, costs);
    predicted.push_back(*std::max_element(predicted.begin(), predicted.end()));
    log::info(
        "model: {}, libnbc's binomial trees (`chimera plan --network ...,binomial`), every "
        "sum started at 0",
        plan::describe(network));
  }
  log::info("{:>4} {:>10} {:>20} {:>5} {:>10} {:>10} {:>10} {:>10} {:>7}", "sum", "bytes", "ranks",
            "hosts", "min ms", "median ms", "max ms", "model ms", "ratio");
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const bool all = i == groups.size();
    const auto& m = measured[i];
    int spanned = hosts;
    std::string bytes = "", ranks = "(the last to end)";
    if (!all) {
      std::vector<int> on;
      for (const int r : groups[i].ranks) on.push_back(host_of[static_cast<std::size_t>(r)]);
      std::sort(on.begin(), on.end());
      spanned = static_cast<int>(std::unique(on.begin(), on.end()) - on.begin());
      bytes = fmt::format("{}", static_cast<long long>(groups[i].bytes));
      ranks = ranks_text(groups[i].ranks);
    }
    const double med = median_of(m);
    log::info("{:>4} {:>10} {:>20} {:>5} {:>10.1f} {:>10.1f} {:>10.1f} {:>10} {:>7}",
              all ? "all" : fmt::format("{}", i), bytes, ranks, spanned,
              *std::min_element(m.begin(), m.end()), med, *std::max_element(m.begin(), m.end()),
              model ? fmt::format("{:.1f}", predicted[i]) : "-",
              model && predicted[i] > 0 ? fmt::format("{:.3f}", med / predicted[i]) : "-");
  }
  if (model && shares_a_host(groups, host_of) && weight_matters(groups, host_of, costs)) {
    const double weight =
        fitted_later_rank_weight(groups, host_of, costs, median_of(measured.back()));
    log::info(
        "later-rank weight that fits the last sum's median: {:.3g}{} (for `--network "
        "...,later-rank-weight={:.3g}`)",
        weight,
        weight >= 1.0         ? ": max-min fair or slower"
        : weight <= kLightest ? ", or less"
                              : "",
        weight);
  }
  return 0;
}

}  // namespace

BenchEntries add_bench_sums(CLI::App& bench) {
  auto flags = std::make_shared<SumsFlags>();
  auto* sums = bench.add_subcommand(
      "sums",
      "Gradient sums posted together on sub-communicators, timed, beside the performance model's "
      "price for them (with --network). Example, the stage and tied-table sums of 1F1B W=4 D=4 on "
      "8 hosts: srun -N 8 -n 16 chimera bench sums --sum 12582912:0,4,8,12 --sum "
      "12582912:1,5,9,13 --sum 12582912:2,6,10,14 --sum 12582912:3,7,11,15 --sum "
      "2097152:0,3,4,7,8,11,12,15 --network 6.4us,41.93ns/B");
  sums->add_option("--sum", flags->sums,
                   "BYTES:RANKS, repeatable: an in-place float32 allreduce of BYTES over the world "
                   "ranks RANKS (comma list and ranges a-b, in the communicator's order)");
  sums->add_option("--network", flags->network,
                   "ALPHA,BETA[,later-rank-weight=W] as `chimera plan --network` takes it "
                   "(`bench p2p` measures ALPHA and BETA): also print the model's end of each "
                   "sum, measured median / model, and where two ranks of a host take part, the "
                   "later-rank weight W at which the model's last sum ends at the measured median");
  sums->add_option("--repeats", flags->repeats,
                   "timed repeats, after one that opens the connections (default 5)");
  return {{sums, [flags] { return run_sums(*flags); }}};
}

}  // namespace chimera::cli
