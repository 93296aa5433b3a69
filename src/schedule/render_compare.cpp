#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/schedule/render.hpp"
#include "render_util.hpp"

namespace chimera::schedule {

namespace {

struct Row {
  std::string label;
  ScheduleRequest request;
};

std::vector<Row> comparison_rows(int D, int N, int v) {
  auto row = [&](std::string label, std::string scheme, std::string variant = "", int pipes = 0,
                 int virtual_stages = 0) {
    return Row{std::move(label),
               {std::move(scheme), D, N, std::move(variant), pipes, virtual_stages}};
  };
  return {row("gpipe", "gpipe"),
          row("1f1b", "1f1b"),
          row("gems", "gems"),
          row(fmt::format("interleaved v={}", v), "interleaved", "", 0, v),
          row("zb-h1", "zb-h1"),
          row("zb-v", "zb-v"),
          row("dualpipev", "dualpipev"),
          row("chimera direct", "chimera", "direct"),
          row("chimera doubling", "chimera", "doubling"),
          row("chimera halving", "chimera", "halving"),
          row("chimera direct, 4 pipes", "chimera", "direct", 4),
          row("bitpipe", "bitpipe"),
          row("bitpipe-zb", "bitpipe-zb"),
          row("chimera-zb", "chimera-zb"),
          row("v-half", "v-half"),
          row("v-min", "v-min")};
}

}  // namespace

std::string render_comparison(int D, int N, int virtual_stages) {
  const Costs equal = Costs::forward_backward(1, 1);
  const Costs double_backward = Costs::forward_backward(1, 2);
  std::string out = fmt::format(
      "Schemes for D={} stages, N={} micro-batches. Makespan in units of F; the schemes with a "
      "split backward (zb-h1, zb-v, dualpipev, chimera-zb, bitpipe-zb, v-half, v-min) split B "
      "into I = W = B/2.\nPeak activations in micro-batches per worker, weights in stages of 1/D "
      "of the model per worker; chunks: the largest peak in chunk-activations (1/(2D) of the "
      "model), the unit of --max-in-flight.\n\n",
      D, N);
  const auto header =
      fmt::format("{:<26} {:>10} {:>8} {:>11} {:>8}  {:>10}  {:>7}  {:>6}\n", "scheme", "F=B: time",
                  "bubble", "B=2F: time", "bubble", "peak act.", "weights", "chunks");
  out += header + std::string(header.size() - 1, '-') + "\n";
  for (const Row& row : comparison_rows(D, N, virtual_stages)) {
    try {
      const Schedule s = make_schedule(row.request);
      const Simulator sim(s);
      const SimResult a = sim.run(equal);
      const SimResult b = sim.run(double_backward);
      const double most = *std::max_element(a.peak_activations.begin(), a.peak_activations.end());
      out += fmt::format("{:<26} {:>10g} {:>8.3f} {:>11g} {:>8.3f}  {:>10}  {:>7}  {:>6g}\n",
                         row.label, a.makespan, a.bubble_ratio, b.makespan, b.bubble_ratio,
                         detail::min_max(a.peak_activations), detail::min_max(a.weight_copies),
                         to_chunks(most));
    } catch (const InputError& e) {
      out += fmt::format("{:<26} n/a: {}\n", row.label, e.what());
    }
  }
  return out;
}

}  // namespace chimera::schedule
