#include "chimera/plan/io_cost.hpp"

#include <algorithm>
#include <cmath>

namespace chimera::plan {

namespace {

// Workers holding each stage in one pipeline group: Chimera's pipelines (2, or --pipes 2f) each
// place every stage on another worker; BitPipe's two V's on mirror workers.
int copies_per_group(const Layout& l) {
  if (l.scheme == "chimera") return l.pipes > 0 ? l.pipes : 2;
  return l.scheme == "chimera-zb" || l.scheme.starts_with("bitpipe") ? 2 : 1;
}

// `bytes` spread over `ranks`, each behind its node's link, all behind the file system.
double transfer_ms(double bytes, int ranks, const FileSystem& fs) {
  const double node = fs.node_bytes_per_ms > 0 ? fs.node_bytes_per_ms * ranks : INFINITY;
  return bytes / std::min(fs.bytes_per_ms, node);
}

}  // namespace

IoPrediction predict_io(double total_params, const Layout& layout, const Network& network,
                        const FileSystem& fs, double iteration_ms, int save_every) {
  IoPrediction p;
  p.checkpoint_bytes = 3.0 * 4.0 * total_params;
  const int copies = copies_per_group(layout);
  p.writers = std::max(1, layout.D / copies);
  p.holders = copies * layout.W;
  const double per_writer = p.checkpoint_bytes / p.writers;

  p.write_ms = transfer_ms(p.checkpoint_bytes, p.writers, fs);
  p.sync_stall_ms = p.write_ms;
  const double snapshot_ms =
      fs.snapshot_bytes_per_ms > 0 ? per_writer / fs.snapshot_bytes_per_ms : 0.0;
  const double between_saves_ms = save_every > 0 ? save_every * iteration_ms : INFINITY;
  p.async_stall_ms = snapshot_ms + std::max(0.0, p.write_ms - between_saves_ms);

  p.resume_read_ms = transfer_ms(p.checkpoint_bytes, p.writers, fs);
  // A large broadcast: scatter + allgather, 2 (h-1)/h beta L, and log2(h) latencies each way.
  if (p.holders > 1) {
    const double h = p.holders;
    p.resume_broadcast_ms = 2.0 * std::log2(h) * network.alpha_ms +
                            2.0 * (h - 1.0) / h * network.beta_ms_per_byte * per_writer;
  }
  p.every_holder_reads_ms = transfer_ms(p.checkpoint_bytes * p.holders, p.writers * p.holders, fs);
  return p;
}

}  // namespace chimera::plan
