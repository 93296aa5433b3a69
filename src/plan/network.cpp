#include "chimera/plan/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "chimera/core/error.hpp"

namespace chimera::plan {

namespace {

constexpr std::string_view kForm =
    "expected ALPHA,BETA such as 5us,10GB/s (ALPHA in s|ms|us|ns; BETA a bandwidth in "
    "GB/s|MB/s|KB/s|B/s or a time per byte in s/B|ms/B|us/B|ns/B)";

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits "12.5us" into 12.5 and "us"; the number must be finite and >= 0.
std::pair<double, std::string_view> number_and_unit(std::string_view part, std::string_view what,
                                                    std::string_view whole) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
  CHIMERA_REQUIRE(ec == std::errc() && std::isfinite(value) && value >= 0,
                  "--network '{}': {} '{}' does not start with a non-negative number; {}", whole,
                  what, part, kForm);
  return {value, trim(std::string_view(end, part.data() + part.size() - end))};
}

double time_unit_ms(std::string_view unit) {
  if (unit == "s") return 1e3;
  if (unit == "ms") return 1.0;
  if (unit == "us") return 1e-3;
  if (unit == "ns") return 1e-6;
  return -1.0;
}

double bandwidth_unit_bytes_per_s(std::string_view unit) {
  if (unit == "GB/s") return 1e9;
  if (unit == "MB/s") return 1e6;
  if (unit == "KB/s" || unit == "kB/s") return 1e3;
  if (unit == "B/s") return 1.0;
  return -1.0;
}

}  // namespace

double Network::allreduce_ms(double bytes, int ranks) const {
  if (ranks <= 1) return 0.0;
  const double r = ranks;
  if (binomial_allreduce)
    return 2.0 * std::ceil(std::log2(r)) * (alpha_ms + beta_ms_per_byte * bytes);
  return 2.0 * std::log2(r) * alpha_ms + 2.0 * (r - 1.0) / r * beta_ms_per_byte * bytes;
}

Network parse_network(std::string_view whole) {
  // Options after ALPHA,BETA: the allreduce's algorithm, the rendezvous size.
  std::string_view text = whole;
  bool binomial = false;
  double rendezvous = std::numeric_limits<double>::infinity();
  double later_rank_weight = 1.0;
  if (const auto second = text.find(',', text.find(',') + 1);
      text.find(',') != std::string_view::npos && second != std::string_view::npos) {
    std::string_view options = text.substr(second + 1);
    text = text.substr(0, second);
    while (true) {
      const auto comma = options.find(',');
      const std::string_view option = trim(options.substr(0, comma));
      if (option.starts_with("rendezvous=")) {
        const std::string_view size = option.substr(std::string_view("rendezvous=").size());
        const auto [value, unit] = number_and_unit(size, "rendezvous=BYTES", whole);
        CHIMERA_REQUIRE(unit.empty() || unit == "B",
                        "--network '{}': rendezvous={} is not a number of bytes", whole, size);
        rendezvous = value;
      } else if (option.starts_with("later-rank-weight=")) {
        const std::string_view weight =
            option.substr(std::string_view("later-rank-weight=").size());
        const auto [value, unit] = number_and_unit(weight, "later-rank-weight=W", whole);
        CHIMERA_REQUIRE(unit.empty() && value > 0 && value <= 1,
                        "--network '{}': later-rank-weight={} is not a weight in (0, 1]", whole,
                        weight);
        later_rank_weight = value;
      } else {
        CHIMERA_REQUIRE(option == "binomial" || option == "rabenseifner",
                        "--network '{}': '{}' is neither an allreduce (rabenseifner, binomial) "
                        "nor rendezvous=BYTES nor later-rank-weight=W",
                        whole, option);
        binomial = option == "binomial";
      }
      if (comma == std::string_view::npos) break;
      options.remove_prefix(comma + 1);
    }
  }
  const auto comma = text.find(',');
  CHIMERA_REQUIRE(comma != std::string_view::npos, "--network '{}': {}", text, kForm);
  Network net;

  const auto [alpha, alpha_unit] = number_and_unit(trim(text.substr(0, comma)), "ALPHA", text);
  const double alpha_scale = time_unit_ms(alpha_unit);
  CHIMERA_REQUIRE(alpha_scale > 0, "--network '{}': ALPHA unit '{}' is not s, ms, us or ns", text,
                  alpha_unit);
  net.alpha_ms = alpha * alpha_scale;

  const auto [beta, beta_unit] = number_and_unit(trim(text.substr(comma + 1)), "BETA", text);
  if (const double per_s = bandwidth_unit_bytes_per_s(beta_unit); per_s > 0) {
    CHIMERA_REQUIRE(beta > 0, "--network '{}': a bandwidth of 0 never delivers a byte", text);
    net.beta_ms_per_byte = 1e3 / (beta * per_s);
  } else {
    CHIMERA_REQUIRE(beta_unit.size() > 2 && beta_unit.ends_with("/B") &&
                        time_unit_ms(beta_unit.substr(0, beta_unit.size() - 2)) > 0,
                    "--network '{}': BETA unit '{}' is neither a bandwidth nor a time per byte; {}",
                    text, beta_unit, kForm);
    net.beta_ms_per_byte = beta * time_unit_ms(beta_unit.substr(0, beta_unit.size() - 2));
  }
  net.binomial_allreduce = binomial;
  net.rendezvous_bytes = rendezvous;
  net.later_rank_weight = later_rank_weight;
  return net;
}

double parse_bandwidth_bytes_per_ms(std::string_view text, std::string_view flag) {
  double value = 0.0;
  const std::string_view t = trim(text);
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  const double per_s =
      bandwidth_unit_bytes_per_s(trim(std::string_view(end, t.data() + t.size() - end)));
  CHIMERA_REQUIRE(ec == std::errc() && std::isfinite(value) && value > 0 && per_s > 0,
                  "{} '{}': expected a bandwidth above 0 such as 100GB/s (GB/s|MB/s|KB/s|B/s)",
                  flag, text);
  return value * per_s / 1e3;
}

namespace {

// Weighted least squares of t = alpha + beta x over points [first, end); alpha and beta >= 0.
HockneyFit least_squares(const std::vector<std::size_t>& bytes, const std::vector<double>& seconds,
                         std::size_t first, bool relative) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = first; i < bytes.size(); ++i) {
    const double w = relative ? 1.0 / (seconds[i] * seconds[i]) : 1.0;
    const double x = static_cast<double>(bytes[i]);
    sw += w;
    sx += w * x;
    sy += w * seconds[i];
    sxx += w * x * x;
    sxy += w * x * seconds[i];
  }
  const double beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  return {std::max(0.0, (sy - beta * sx) / sw), std::max(0.0, beta)};
}

void require_points(const std::vector<std::size_t>& bytes, const std::vector<double>& seconds) {
  CHIMERA_CHECK(bytes.size() == seconds.size() && bytes.size() >= 2 &&
                    std::is_sorted(bytes.begin(), bytes.end()) && bytes.front() < bytes.back(),
                "a network fit needs two or more distinct message sizes in ascending order");
}

}  // namespace

HockneyFit fit_all_sizes(const std::vector<std::size_t>& bytes,
                         const std::vector<double>& seconds) {
  require_points(bytes, seconds);
  return least_squares(bytes, seconds, 0, true);
}

HockneyFit fit_large_messages(const std::vector<std::size_t>& bytes,
                              const std::vector<double>& seconds) {
  require_points(bytes, seconds);
  std::size_t first = bytes.size() - 2;
  while (first > 0 && bytes[first - 1] * 16 >= bytes.back()) --first;
  HockneyFit fit = least_squares(bytes, seconds, first, false);
  fit.alpha_s = seconds.front();
  fit.from_bytes = bytes[first];
  return fit;
}

std::string describe(const Network& n) {
  const std::string bandwidth = n.beta_ms_per_byte > 0
                                    ? fmt::format(" ({:.3g} GB/s)", 1e-6 / n.beta_ms_per_byte)
                                    : std::string(" (infinite bandwidth)");
  const std::string hosts =
      n.ranks_per_host > 1
          ? fmt::format(", {} ranks per host (within one: alpha {:.3g} us, beta {:.3g} ns/B)",
                        n.ranks_per_host, n.host_alpha_ms * 1e3, n.host_beta_ms_per_byte * 1e6)
          : std::string();
  const std::string rendezvous =
      std::isfinite(n.rendezvous_bytes)
          ? fmt::format(", messages over {:.0f} B wait for their sender's progress",
                        n.rendezvous_bytes)
          : std::string();
  const std::string weighted =
      n.later_rank_weight < 1.0
          ? fmt::format(", a host's later ranks weighted {:.3g} on its link", n.later_rank_weight)
          : std::string();
  return fmt::format(
      "alpha {:.3g} us, beta {:.3g} ns/B{}{}{}{}{}", n.alpha_ms * 1e3, n.beta_ms_per_byte * 1e6,
      bandwidth, n.binomial_allreduce ? ", binomial allreduce" : "", rendezvous, weighted, hosts);
}

}  // namespace chimera::plan
