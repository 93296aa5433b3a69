#include "chimera/plan/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"

namespace chimera::plan {

// SCHEME[:OPTION...]: chimera[:VARIANT[:PIPES]] or interleaved[:V]. What the options set is
// checked against the table of scheme settings; an option of another scheme (a word is taken
// for a variant, a number for pipes) is refused by the line `train` and `schedule` print.
SchemeChoice parse_scheme_choice(std::string_view text) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in{std::string(text)};
  while (std::getline(in, part, ':')) parts.push_back(part);
  const auto& names = schedule::scheme_names();
  CHIMERA_REQUIRE(!parts.empty() && std::find(names.begin(), names.end(), parts[0]) != names.end(),
                  "scheme '{}' is not one of {} (with options: chimera:VARIANT[:PIPES], "
                  "interleaved:V)",
                  text, scheme_list());
  SchemeChoice c{parts[0], "", 0, 0};
  auto number = [&](const std::string& s) {
    int x = 0;
    std::istringstream is(s);
    CHIMERA_REQUIRE((is >> x) && is.eof() && x >= 1, "scheme '{}': '{}' is not a positive number",
                    text, s);
    return x;
  };
  if (c.scheme == "chimera") {
    CHIMERA_REQUIRE(parts.size() <= 3, "scheme '{}': expected chimera[:VARIANT[:PIPES]]", text);
    if (parts.size() > 1) c.variant = parts[1];
    if (parts.size() > 2) c.pipes = number(parts[2]);
  } else if (c.scheme == "interleaved") {
    CHIMERA_REQUIRE(parts.size() <= 2, "scheme '{}': expected interleaved[:V]", text);
    if (parts.size() > 1) c.virtual_stages = number(parts[1]);
  } else if (parts.size() > 1) {
    const std::string& option = parts[1];
    const bool numeric = !option.empty() && std::isdigit(static_cast<unsigned char>(option[0]));
    if (numeric) c.pipes = number(option);
    if (!numeric) c.variant = option;
  }
  check_scheme_settings({c.scheme, c.variant, c.pipes, c.virtual_stages, 0});
  CHIMERA_REQUIRE(parts.size() == 1 || c.scheme == "chimera" || c.scheme == "interleaved",
                  "scheme '{}' takes no options", text);
  return c;
}

std::vector<SchemeChoice> default_scheme_choices() {
  return {{"gpipe", "", 0, 0},
          {"1f1b", "", 0, 0},
          {"gems", "", 0, 0},
          {"interleaved", "", 0, 2},
          {"interleaved", "", 0, 4},
          {"chimera", "direct", 0, 0},
          {"chimera", "doubling", 0, 0},
          {"chimera", "halving", 0, 0},
          {"chimera", "direct", 4, 0},
          {"chimera", "direct", 8, 0},
          {"zb-h1", "", 0, 0},
          {"chimera-zb", "", 0, 0},
          {"zb-v", "", 0, 0},
          {"dualpipev", "", 0, 0},
          {"bitpipe", "", 0, 0},
          {"bitpipe-zb", "", 0, 0},
          {"v-half", "", 0, 0},
          {"v-min", "", 0, 0}};
}

PlanResult plan(const PlanRequest& r, Predictor& predict) {
  CHIMERA_REQUIRE(r.nodes >= 1, "--nodes must be >= 1, got {}", r.nodes);
  CHIMERA_REQUIRE(r.global_batch >= 1, "--global-batch must be >= 1, got {}", r.global_batch);
  CHIMERA_REQUIRE(r.max_micro_batch_size >= 1, "--max-micro-batch-size must be >= 1, got {}",
                  r.max_micro_batch_size);
  CHIMERA_REQUIRE(!r.schemes.empty(), "no schemes to plan for");
  PlanResult result;
  const int blocks = predict.shape().num_blocks();
  for (int D = 1; D <= std::min(r.nodes, blocks); ++D) {
    if (r.nodes % D != 0) continue;
    if (D % predict.machine().network.ranks_per_host != 0)
      continue;  // hosts hold whole groups' parts
    const int W = r.nodes / D;
    if (r.global_batch % W != 0) continue;
    const int per_group = r.global_batch / W;
    for (int B = 1; B <= std::min(per_group, r.max_micro_batch_size); ++B) {
      if (per_group % B != 0) continue;
      for (const SchemeChoice& c : r.schemes) {
        for (const bool recompute : {false, true}) {
          if (recompute && !r.consider_recompute) continue;
          const Layout layout{c.scheme,      c.variant, c.pipes,   c.virtual_stages, W, D,
                              per_group / B, B,         recompute, r.shard_optimizer};
          ++result.layouts;
          try {
            Prediction p = predict(layout);
            if (p.fits) {
              result.ranked.push_back(std::move(p));
            } else {
              ++result.over_memory;
            }
          } catch (const InputError& e) {
            if (result.first_invalid.empty()) {
              result.first_invalid = fmt::format(
                  "{} W={} D={} N={} B={}: {}", layout.scheme_label(), W, D, layout.N, B, e.what());
            }
            ++result.invalid;
          }
        }
      }
    }
  }
  CHIMERA_REQUIRE(result.layouts > 0,
                  "no layout W x D = {} divides the global batch {} into whole micro-batches: "
                  "choose a global batch that is a multiple of the node count's divisors",
                  r.nodes, r.global_batch);
  // Fastest first; ties go to less memory, then to the simpler layout (smaller D).
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const Prediction& a, const Prediction& b) {
                     if (a.iteration_ms != b.iteration_ms) return a.iteration_ms < b.iteration_ms;
                     if (a.peak_memory_bytes != b.peak_memory_bytes) {
                       return a.peak_memory_bytes < b.peak_memory_bytes;
                     }
                     return a.layout.D < b.layout.D;
                   });
  return result;
}

std::vector<Prediction> best_per_scheme(const PlanResult& result) {
  std::vector<Prediction> best;
  for (const Prediction& p : result.ranked) {  // ranked: the first of each scheme is its best
    const bool seen = std::any_of(best.begin(), best.end(), [&](const Prediction& b) {
      return b.layout.scheme == p.layout.scheme;
    });
    if (!seen) best.push_back(p);
  }
  return best;
}

namespace {

std::string layout_text(const Layout& l) {
  return fmt::format("{} W={} D={} B={} N={}{}{}", l.scheme_label(), l.W, l.D, l.B, l.N,
                     l.recompute ? " recompute" : "", l.shard_optimizer ? " sharded" : "");
}

struct Part {
  const char* name;
  double Prediction::*ms;
};
constexpr std::array<Part, 6> kParts = {{{"work", &Prediction::work_ms},
                                         {"bubbles", &Prediction::bubble_ms},
                                         {"p2p", &Prediction::p2p_ms},
                                         {"weight gather waits", &Prediction::gather_exposed_ms},
                                         {"exposed allreduce", &Prediction::allreduce_exposed_ms},
                                         {"optimizer", &Prediction::optimizer_ms}}};

}  // namespace

std::string explain(const PlanResult& result) {
  if (result.ranked.empty()) return "No layout fits in memory.\n";
  const Prediction& win = result.ranked.front();
  std::string out = fmt::format("Why {} wins ({:.1f} ms per iteration):\n", layout_text(win.layout),
                                win.iteration_ms);
  // Sharded optimizer state adds the waits for the weight gathers (the search shards all or none).
  const bool sharded = win.layout.shard_optimizer;
  out += fmt::format("  {:<36} {:>9} {:>9} {:>8}{} {:>10} {:>9} {:>9}\n", "ms per iteration",
                     "work", "bubbles", "p2p", sharded ? fmt::format(" {:>8}", "gather") : "",
                     "allreduce", "optimizer", "total");
  const std::vector<Prediction> best = best_per_scheme(result);
  for (const Prediction& p : best) {
    out += fmt::format("  {:<36} {:>9.1f} {:>9.1f} {:>8.1f}{} {:>10.1f} {:>9.1f} {:>9.1f}\n",
                       layout_text(p.layout), p.work_ms, p.bubble_ms, p.p2p_ms,
                       sharded ? fmt::format(" {:>8.1f}", p.gather_exposed_ms) : "",
                       p.allreduce_exposed_ms, p.optimizer_ms, p.iteration_ms);
  }
  for (const Prediction& p : best) {
    if (p.layout.scheme == win.layout.scheme) continue;
    const Part* biggest = &kParts[0];
    for (const Part& part : kParts) {
      if (p.*part.ms - win.*part.ms > p.*biggest->ms - win.*biggest->ms) biggest = &part;
    }
    out += fmt::format("  - {:.2f}x faster than {} at its best: mostly {} ({:.1f} vs {:.1f} ms)",
                       p.iteration_ms / win.iteration_ms, p.layout.scheme, biggest->name,
                       win.*biggest->ms, p.*biggest->ms);
    if (p.layout.recompute && !win.layout.recompute) {
      out += fmt::format("; its best layout recomputes activations");
    }
    out += "\n";
  }
  return out;
}

}  // namespace chimera::plan
