// The built-in schedules the search starts from: every scheme make_schedule knows, with every
// variant it takes for D and N. Schemes added to scheme_names() later are tried with their
// defaults, so the search stays never worse than the best of them.
#include <fmt/format.h>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/search.hpp"

namespace chimera::schedule {

namespace {

void try_add(std::vector<Candidate>& out, std::string label, const ScheduleRequest& request) {
  try {
    out.push_back({std::move(label), make_schedule(request)});
  } catch (const InputError&) {
    // Not defined for this D and N (odd D for chimera, N % D for interleaved, ...).
  }
}

}  // namespace

std::vector<Candidate> builtin_candidates(int D, int N) {
  std::vector<Candidate> out;
  for (const std::string& scheme : scheme_names()) {
    if (scheme == "chimera") {
      for (const char* variant : {"direct", "doubling", "halving"}) {
        for (int f = 1; f <= D / 2; ++f) {
          if ((D / 2) % f != 0) continue;
          const std::string label = f == 1 ? fmt::format("chimera {}", variant)
                                           : fmt::format("chimera {}, {} pipes", variant, 2 * f);
          try_add(out, label, {scheme, D, N, variant, 2 * f, 0});
        }
      }
    } else if (scheme == "interleaved") {
      try_add(out, "interleaved v=2", {scheme, D, N, "", 0, 2});
    } else {
      try_add(out, scheme, {scheme, D, N, "", 0, 0});
    }
  }
  return out;
}

}  // namespace chimera::schedule
