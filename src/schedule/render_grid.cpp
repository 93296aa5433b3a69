#include <cmath>

#include "chimera/schedule/render.hpp"
#include "render_util.hpp"

namespace chimera::schedule {

namespace {

bool multiple_of(double x, double q) {
  const double n = std::round(x / q);
  return std::abs(x - n * q) <= 1e-9 * std::max(1.0, std::abs(x));
}

// The largest power of two (64 down to 1/64) that divides every start and end; otherwise the
// shortest op, with times rounded to it.
double time_quantum(const std::vector<std::vector<OpSpan>>& timeline) {
  for (double q = 64; q >= 1.0 / 64; q /= 2) {
    bool fits = true;
    for (const auto& line : timeline) {
      for (const OpSpan& s : line) fits = fits && multiple_of(s.start, q) && multiple_of(s.end, q);
    }
    if (fits) return q;
  }
  double shortest = 0;
  for (const auto& line : timeline) {
    for (const OpSpan& s : line) {
      const double d = s.end - s.start;
      if (d > 0 && (shortest == 0 || d < shortest)) shortest = d;
    }
  }
  return shortest > 0 ? shortest : 1.0;
}

}  // namespace

std::string render_grid(const Schedule& s, const SimResult& r, const Costs& costs) {
  const auto timeline = display_timeline(s, r, costs);
  // Costs far apart (1:10^6) would need millions of columns: then a column stands for more and
  // ops shorter than it may hide each other.
  constexpr double kMaxColumns = 4096;
  const double q = std::max(time_quantum(timeline), r.makespan / kMaxColumns);
  const auto columns = static_cast<std::size_t>(std::max(0.0, std::ceil(r.makespan / q - 1e-9)));

  std::size_t width = 2;
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) width = std::max(width, op_label(s, op).size() + 1);
  }
  const std::size_t prefix = fmt::format("P{}", s.workers - 1).size() + 2;

  std::string out;
  for (int w = 0; w < s.workers; ++w) {
    // Each cell: the op's label where it starts, '-' where it continues, '.' when idle.
    std::vector<std::string> cells(columns, ".");
    for (const OpSpan& span : timeline[w]) {
      const auto first = static_cast<std::size_t>(std::llround(span.start / q));
      const auto last = std::max(first + 1, static_cast<std::size_t>(std::llround(span.end / q)));
      for (std::size_t c = first; c < last && c < columns; ++c) {
        cells[c] = c == first ? op_label(s, s.ops[w][span.op]) : std::string(width - 1, '-');
      }
    }
    std::string row = fmt::format("{:<{}}", fmt::format("P{}", w), prefix);
    for (const std::string& cell : cells) row += fmt::format("{:<{}}", cell, width);
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
  }

  const std::string cost_text = detail::has_split_backward(s)
                                    ? fmt::format("F={:g} I={:g} W={:g}", costs.F, costs.I, costs.W)
                                    : fmt::format("F={:g} B={:g}", costs.F, costs.B);
  const std::string name = s.variant.empty() ? s.scheme : s.scheme + " " + s.variant;
  out += fmt::format("\n{}: D={} N={}, one column = {:g} ({})\n", name, s.workers,
                     s.configured_micro_batches(), q, cost_text);
  out += fmt::format("makespan          {:g}\n", r.makespan);
  out += fmt::format("bubble ratio      {:.4f}\n", r.bubble_ratio);
  out += fmt::format("idle per worker   {}\n", detail::join_numbers(r.idle));
  out += fmt::format("peak activations  {}  (micro-batches per worker)\n",
                     detail::join_numbers(r.peak_activations));
  out += fmt::format("weight copies     {}  (stages of 1/D of the model per worker)\n",
                     detail::join_numbers(r.weight_copies));
  if (r.allreduce_total > 0) {
    out +=
        fmt::format("allreduce         {:g} in all, {:g} hidden, {:g} exposed: iteration {:g}\n",
                    r.allreduce_total, r.allreduce_hidden, r.allreduce_exposed, r.iteration_time);
  }
  return out;
}

}  // namespace chimera::schedule
