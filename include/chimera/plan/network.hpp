#pragma once
// The network of the performance model: a message of n bytes between two devices takes
// alpha + beta * n (Hockney). The same alpha and beta drive the Rabenseifner allreduce the
// simulator charges for gradient synchronisation.
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::plan {

struct Network {
  double alpha_ms = 0.0;          // latency per message
  double beta_ms_per_byte = 0.0;  // inverse bandwidth
  // Open MPI's in-place non-blocking allreduce: a binomial reduce and broadcast of the whole
  // buffer, 2 ceil(log2 r) (alpha + beta L), instead of Rabenseifner's (",binomial" in --network);
  // for sharded optimizer state, libnbc's linear all-gather (schedule/simulate.hpp).
  bool binomial_allreduce = false;
  // Ranks sharing one host and its link (a pipeline group's consecutive ranks; it divides D):
  // messages between two of them take host_alpha + host_beta n (memory; free unless given), the
  // others share the host's link (schedule::Costs::ranks_per_host). 1: a device per node.
  // Messages larger than this need their sender's progress to move (MPI over TCP), and wait for
  // the end of the op it computes (schedule::Costs::rendezvous_bytes; ",rendezvous=BYTES" in
  // --network, as `chimera bench p2p` measures it). Infinity: never (RDMA networks).
  double rendezvous_bytes = std::numeric_limits<double>::infinity();
  int ranks_per_host = 1;
  // Where ranks of one host send (or receive) sums' messages on its link at once, each rank's
  // flows weigh this much less than those of the rank whose sum started before
  // (schedule::Costs::later_rank_weight; ",later-rank-weight=W" in --network, as `chimera bench
  // sums` fits it). 1: max-min fair.
  double later_rank_weight = 1.0;
  double host_alpha_ms = 0.0;
  double host_beta_ms_per_byte = 0.0;

  double message_ms(double bytes) const { return alpha_ms + beta_ms_per_byte * bytes; }
  // Rabenseifner allreduce (reduce-scatter + allgather) of `bytes` over `ranks`:
  // 2 log2(r) alpha + 2 (r-1)/r beta L; binomial: 2 ceil(log2 r) (alpha + beta L).
  double allreduce_ms(double bytes, int ranks) const;
};

// Parses "ALPHA,BETA[,ALLREDUCE][,rendezvous=BYTES][,later-rank-weight=W]": ALLREDUCE
// rabenseifner (default) or binomial; rendezvous=BYTES Network::rendezvous_bytes;
// later-rank-weight=W (0 < W <= 1) Network::later_rank_weight; ALPHA a time with
// unit s, ms, us or ns ("5us"); BETA a bandwidth
// ("10GB/s", "800MB/s", decimal units) or a time per byte ("0.1ns/B"). Throws InputError naming
// the part that is wrong.
Network parse_network(std::string_view text);

// "100GB/s" (GB/s, MB/s, KB/s, B/s; decimal units) in bytes per millisecond; an InputError
// naming `flag` unless it is a bandwidth above 0.
double parse_bandwidth_bytes_per_ms(std::string_view text, std::string_view flag);

// alpha and beta fitted to one-way times (seconds) of messages of `bytes` (ascending), as
// `chimera bench p2p` measures them; both in seconds and seconds per byte.
struct HockneyFit {
  double alpha_s = 0.0;
  double beta_s_per_byte = 0.0;
  std::size_t from_bytes = 0;  // the smallest size beta was fitted on
};
// Over all sizes, minimising the relative error (weights 1/t^2), so that the microsecond latencies
// of small messages count as much as the milliseconds of large ones: right where the bandwidth is
// the same for every size (memory, a plain network).
HockneyFit fit_all_sizes(const std::vector<std::size_t>& bytes, const std::vector<double>& seconds);
// beta from the large messages only (least squares over the sizes within 16x of the largest, at
// least the two largest), alpha the smallest message's time: right for a shaped link, whose
// token bucket lets small messages through at memory speed and holds large ones to its rate.
HockneyFit fit_large_messages(const std::vector<std::size_t>& bytes,
                              const std::vector<double>& seconds);

// "alpha 5 us, beta 0.1 ns/B (10 GB/s)"
std::string describe(const Network& network);

}  // namespace chimera::plan
