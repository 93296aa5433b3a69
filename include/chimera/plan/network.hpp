#pragma once
// The network of the performance model: a message of n bytes between two devices takes
// alpha + beta * n (Hockney). The same alpha and beta drive the Rabenseifner allreduce the
// simulator charges for gradient synchronisation.
#include <string>
#include <string_view>

namespace chimera::plan {

struct Network {
  double alpha_ms = 0.0;          // latency per message
  double beta_ms_per_byte = 0.0;  // inverse bandwidth
  // Open MPI's in-place non-blocking allreduce: a binomial reduce and broadcast of the whole
  // buffer, 2 ceil(log2 r) (alpha + beta L), instead of Rabenseifner's (",binomial" in --network);
  // for sharded optimizer state, libnbc's reduce-scatter and all-gather (schedule/simulate.hpp).
  bool binomial_allreduce = false;

  double message_ms(double bytes) const { return alpha_ms + beta_ms_per_byte * bytes; }
  // Rabenseifner allreduce (reduce-scatter + allgather) of `bytes` over `ranks`:
  // 2 log2(r) alpha + 2 (r-1)/r beta L; binomial: 2 ceil(log2 r) (alpha + beta L).
  double allreduce_ms(double bytes, int ranks) const;
};

// Parses "ALPHA,BETA[,ALLREDUCE]": ALLREDUCE rabenseifner (default) or binomial; ALPHA a time with
// unit s, ms, us or ns ("5us"); BETA a bandwidth
// ("10GB/s", "800MB/s", decimal units) or a time per byte ("0.1ns/B"). Throws InputError naming
// the part that is wrong.
Network parse_network(std::string_view text);

// "100GB/s" (GB/s, MB/s, KB/s, B/s; decimal units) in bytes per millisecond; an InputError
// naming `flag` unless it is a bandwidth above 0.
double parse_bandwidth_bytes_per_ms(std::string_view text, std::string_view flag);

// "alpha 5 us, beta 0.1 ns/B (10 GB/s)"
std::string describe(const Network& network);

}  // namespace chimera::plan
