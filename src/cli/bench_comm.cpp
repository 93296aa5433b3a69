// `chimera bench p2p` and `chimera bench allreduce`: the network figures the performance model
// needs (alpha, beta for point-to-point; the allreduce the gradient sync runs), measured with the
// same MPI the runtime uses. Run under mpiexec; every rank takes part.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "bench_commands.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "chimera/plan/network.hpp"

namespace chimera::cli {

namespace {

struct CommFlags {
  std::size_t max_bytes = std::size_t{64} << 20;
  int repeats = 20;
};

std::vector<std::size_t> sizes_up_to(std::size_t max_bytes) {
  std::vector<std::size_t> out;
  for (std::size_t b = 4; b <= max_bytes; b *= 4) out.push_back(b);
  return out;
}

void require_repeats(const CommFlags& f) {
  CHIMERA_REQUIRE(f.repeats >= 1, "--repeats {}: must be at least 1", f.repeats);
  CHIMERA_REQUIRE(f.max_bytes >= 4, "--max-bytes {}: must be at least 4", f.max_bytes);
}

// Which messages move while their sender computes. Rank 1 posts its receive and waits; rank 0
// posts the send, then makes no MPI call for `busy_s` (an op computing), then waits. A message
// in by then went without the sender's progress (eager, or read by the receiver over RDMA); a
// later one waited for the sender's next MPI call (a rendezvous over TCP). Sizes whose transfer
// alone takes more than a quarter of `busy_s` cannot tell and end the search. The largest size
// that moved, and the smallest that waited (0 where none did).
std::pair<std::size_t, std::size_t> sender_progress_limit(const comm::MpiSession& mpi,
                                                          const std::vector<std::size_t>& sizes,
                                                          const std::vector<double>& one_way,
                                                          std::vector<char>& buf) {
  constexpr double busy_s = 0.05;
  std::size_t moved = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (one_way[i] > busy_s / 4) break;
    const int n = static_cast<int>(sizes[i]);
    double arrival = 1e30;
    for (int r = 0; r < 2; ++r) {
      MPI_Request request = MPI_REQUEST_NULL;
      if (mpi.rank() == 1)
        MPI_CHECK(MPI_Irecv(buf.data(), n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &request));
      MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      const double t0 = now_seconds();
      if (mpi.rank() == 0) {
        MPI_CHECK(MPI_Isend(buf.data(), n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, &request));
        sleep_seconds(busy_s);
      }
      MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
      arrival = std::min(arrival, now_seconds() - t0);
    }
    // Rank 1's verdict is the one that counts: every rank takes it.
    int waited = mpi.rank() == 1 && arrival >= busy_s ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &waited, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (waited != 0) return {moved, sizes[i]};
    moved = sizes[i];
  }
  return {moved, 0};
}

int run_p2p(const CommFlags& f) {
  const comm::MpiSession mpi(nullptr, nullptr);
  CHIMERA_REQUIRE(mpi.size() >= 2,
                  "bench p2p needs 2 ranks: mpirun -np 2 chimera bench p2p (got {})", mpi.size());
  require_repeats(f);
  const auto sizes = sizes_up_to(f.max_bytes);
  std::vector<char> buf(f.max_bytes);
  std::vector<double> one_way;
  log::info("p2p ping-pong between ranks 0 and 1 ({} repeats per size)", f.repeats);
  log::info("{:>12} {:>12} {:>12}", "bytes", "one-way us", "GB/s");
  for (const std::size_t b : sizes) {
    const int n = static_cast<int>(b);
    double best = 1e30;
    for (int r = 0; r < f.repeats + 1; ++r) {
      MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      const double t0 = now_seconds();
      if (mpi.rank() == 0) {
        MPI_CHECK(MPI_Send(buf.data(), n, MPI_CHAR, 1, 0, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Recv(buf.data(), n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      } else if (mpi.rank() == 1) {
        MPI_CHECK(MPI_Recv(buf.data(), n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(buf.data(), n, MPI_CHAR, 0, 0, MPI_COMM_WORLD));
      }
      if (r > 0) best = std::min(best, (now_seconds() - t0) / 2);  // r = 0 warms up
    }
    one_way.push_back(best);
    log::info("{:>12} {:>12.2f} {:>12.3f}", b, best * 1e6, static_cast<double>(b) / best / 1e9);
  }
  const auto [moved, waited] = sender_progress_limit(mpi, sizes, one_way, buf);
  if (waited > 0) {
    log::info(
        "sender progress: messages up to {} B arrived while the sender computed; {} B waited "
        "for its next MPI call (a rendezvous the sender drives); for `chimera plan --network "
        "...,rendezvous={}`",
        moved, waited, moved);
  } else {
    log::info("sender progress: every message up to {} B arrived while the sender computed", moved);
  }
  if (sizes.size() < 2) return 0;  // one size: nothing to fit
  const plan::HockneyFit all = plan::fit_all_sizes(sizes, one_way);
  log::info(
      "fit t = alpha + beta*bytes: alpha = {:.2f} us, beta = {:.4f} ns/B ({:.2f} GB/s); "
      "for `chimera plan --network {:.3g},{:.3g}`",
      all.alpha_s * 1e6, all.beta_s_per_byte * 1e9,
      all.beta_s_per_byte > 0 ? 1e-9 / all.beta_s_per_byte : 0.0, all.alpha_s, all.beta_s_per_byte);
  // A shaped link passes small messages at memory speed and holds large ones to its rate: the
  // fit above then mixes the two; this one takes the rate from the large messages alone.
  const plan::HockneyFit large = plan::fit_large_messages(sizes, one_way);
  log::info(
      "large-message fit: alpha = {:.2f} us ({} B), beta = {:.4f} ns/B ({:.3f} GB/s, sizes >= {} "
      "B); for `chimera plan --network {:.4g}us,{:.4g}ns/B`",
      large.alpha_s * 1e6, sizes.front(), large.beta_s_per_byte * 1e9,
      large.beta_s_per_byte > 0 ? 1e-9 / large.beta_s_per_byte : 0.0, large.from_bytes,
      large.alpha_s * 1e6, large.beta_s_per_byte * 1e9);
  return 0;
}

int run_allreduce(const CommFlags& f) {
  const comm::MpiSession mpi(nullptr, nullptr);
  require_repeats(f);
  const int r = mpi.size();
  const auto sizes = sizes_up_to(f.max_bytes);
  std::vector<float> buf(f.max_bytes / sizeof(float) + 1, 1.0F);
  log::info("allreduce (sum of float32) over {} ranks, best of {} repeats", r, f.repeats);
  log::info("{:>12} {:>14} {:>16} {:>14}", "bytes", "blocking us", "non-blocking us", "bus GB/s");
  for (const std::size_t b : sizes) {
    const int n = static_cast<int>(std::max<std::size_t>(1, b / sizeof(float)));
    double best_blocking = 1e30, best_nonblocking = 1e30;
    for (int rep = 0; rep < f.repeats + 1; ++rep) {
      MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      double t0 = now_seconds();
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
      const double blocking = now_seconds() - t0;
      MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      t0 = now_seconds();
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_CHECK(
          MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
      comm::wait(req, comm::WaitPolicy{});
      const double nonblocking = now_seconds() - t0;
      if (rep > 0) {
        best_blocking = std::min(best_blocking, blocking);
        best_nonblocking = std::min(best_nonblocking, nonblocking);
      }
      std::fill(buf.begin(), buf.begin() + n, 1.0F);  // keep the values finite
    }
    // Bus bandwidth: the bytes each rank moves in a bandwidth-optimal allreduce, per second.
    const double bus =
        r > 1 ? 2.0 * (r - 1) / r * static_cast<double>(n) * sizeof(float) / best_blocking / 1e9
              : 0.0;
    log::info("{:>12} {:>14.1f} {:>16.1f} {:>14.3f}", static_cast<std::size_t>(n) * sizeof(float),
              best_blocking * 1e6, best_nonblocking * 1e6, bus);
  }
  return 0;
}

}  // namespace

BenchEntries add_bench_comm(CLI::App& bench) {
  auto flags = std::make_shared<CommFlags>();
  auto* p2p = bench.add_subcommand(
      "p2p",
      "Point-to-point latency and bandwidth between ranks 0 and 1, with the alpha/beta fit the "
      "planner takes. Example: mpirun -np 2 chimera bench p2p");
  auto* allreduce = bench.add_subcommand(
      "allreduce",
      "Blocking and non-blocking allreduce time over all ranks by message size. Example: "
      "mpirun -np 8 chimera bench allreduce");
  for (auto* sub : {p2p, allreduce}) {
    sub->add_option("--max-bytes", flags->max_bytes, "Largest message in bytes (sizes 4, 16, ...)");
    sub->add_option("--repeats", flags->repeats, "Timed repeats per size (the best counts)");
  }
  return {{p2p, [flags] { return run_p2p(*flags); }},
          {allreduce, [flags] { return run_allreduce(*flags); }}};
}

}  // namespace chimera::cli
