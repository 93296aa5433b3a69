#include <cmath>

#include "chimera/schedule/render.hpp"
#include "render_util.hpp"

namespace chimera::schedule {

namespace {

const char* fill_of(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return "#4c78a8";  // blue
    case OpKind::B:
      return "#f58518";  // orange
    case OpKind::I:
      return "#e45756";  // red
    case OpKind::W:
      return "#b279a2";  // purple
  }
  return "#000000";
}

constexpr const char* kIdle = "#e6e6e6";
constexpr const char* kAllreduce = "#54a24b";  // green

}  // namespace

std::string render_svg(const Schedule& s, const SimResult& r, const Costs& costs) {
  const auto timeline = display_timeline(s, r, costs);
  const double span = std::max(r.iteration_time, 1e-12);
  constexpr double kLeft = 48, kTop = 34, kRow = 26, kBar = 18, kLane = 5, kWidth = 960;
  const double scale = kWidth / span;
  const double height = kTop + s.workers * kRow + 46;
  const std::string name = s.variant.empty() ? s.scheme : s.scheme + " " + s.variant;

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"monospace\" font-size=\"10\">\n",
      kLeft + kWidth + 16, height);
  out += fmt::format(
      "<text x=\"{}\" y=\"16\" font-size=\"13\">{}: D={} N={}, makespan {:g}, bubble ratio "
      "{:.3f}</text>\n",
      kLeft, name, s.workers, s.configured_micro_batches(), r.makespan, r.bubble_ratio);
  for (int w = 0; w < s.workers; ++w) {
    const double y = kTop + w * kRow;
    out += fmt::format("<text x=\"4\" y=\"{:.1f}\">P{}</text>\n", y + 13, w);
    out += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"/>\n",
                       kLeft, y, r.makespan * scale, kBar, kIdle);
    for (const OpSpan& op_span : timeline[w]) {
      const Op& op = s.ops[w][op_span.op];
      const double x = kLeft + op_span.start * scale;
      const double width = (op_span.end - op_span.start) * scale;
      const std::string label = op_label(s, op);
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"#ffffff\" stroke-width=\"0.5\"><title>{} [{:g}, {:g})</title></rect>\n",
          x, y, width, kBar, fill_of(op.kind), label, op_span.start, op_span.end);
      if (width >= 6.2 * static_cast<double>(label.size()) + 2) {
        out += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"#ffffff\">{}</text>\n", x + 1.5,
                           y + 13, label);
      }
    }
  }
  for (const StageAllreduce& a : r.allreduce) {
    if (a.end <= a.start) continue;
    for (int w : a.holders) {
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>"
          "allreduce stage {} [{:g}, {:g})</title></rect>\n",
          kLeft + a.start * scale, kTop + w * kRow + kBar + 1, (a.end - a.start) * scale, kLane,
          kAllreduce, a.stage, a.start, a.end);
    }
  }
  const double legend_y = kTop + s.workers * kRow + 16;
  double x = kLeft;
  const std::pair<const char*, const char*> legend[] = {{"forward", fill_of(OpKind::F)},
                                                        {"backward", fill_of(OpKind::B)},
                                                        {"input grad (I)", fill_of(OpKind::I)},
                                                        {"weight grad (W)", fill_of(OpKind::W)},
                                                        {"idle", kIdle},
                                                        {"allreduce", kAllreduce}};
  for (const auto& [text, color] : legend) {
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        x, legend_y, color, x + 16, legend_y + 9, text);
    x += 16 + 7.0 * static_cast<double>(std::string(text).size()) + 18;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace chimera::schedule
