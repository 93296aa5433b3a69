#include "chimera/core/parallel_settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "chimera/core/error.hpp"

namespace chimera {

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> names = {
      "gpipe", "1f1b",      "gems",    "interleaved", "chimera", "zb-h1", "chimera-zb",
      "zb-v",  "dualpipev", "bitpipe", "bitpipe-zb",  "v-half",  "v-min"};
  return names;
}

std::string scheme_list() {
  return fmt::format("{}", fmt::join(scheme_names(), ", "));
}

namespace {

// The pipelines a scheme runs of itself: `pipes` equal to it says nothing new. A schedule file's
// count is checked against the file when it is read.
bool own_pipes(const SchemeSettings& s) {
  if (s.scheme.starts_with("file:")) return true;
  const int own =
      s.scheme == "gems" || s.scheme == "chimera-zb" || s.scheme.starts_with("bitpipe") ? 2 : 1;
  return s.pipes == own;
}

// "max_in_flight" -> "--max-in-flight": the `chimera schedule` flag of a key.
std::string flag(std::string_view key) {
  std::string f = "--" + std::string(key);
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

std::string number_given(int value, bool left) {
  return left ? std::string() : fmt::format("{}", value);
}

}  // namespace

const std::vector<SchemeSetting>& scheme_settings() {
  static const std::vector<SchemeSetting> table = {
      {"variant",
       {"chimera"},
       "direct, doubling or halving",
       [](const SchemeSettings& s) {
         return s.variant.empty() || s.variant == "direct" ? std::string() : std::string(s.variant);
       },
       [](const SchemeSettings& s) {
         return s.variant.empty() || s.variant == "direct" || s.variant == "doubling" ||
                s.variant == "halving";
       }},
      {"pipes",
       {"chimera"},
       "0 (the scheme's own) or an even number 2f >= 2",
       [](const SchemeSettings& s) {
         return number_given(s.pipes, s.pipes == 0 || (s.scheme != "chimera" && own_pipes(s)));
       },
       [](const SchemeSettings& s) { return s.pipes >= 0; }},
      {"virtual",
       {"interleaved"},
       "0 (= 2) or model stages per worker v >= 2",
       [](const SchemeSettings& s) {
         return number_given(s.virtual_stages, s.virtual_stages == 0 || s.virtual_stages == 1);
       },
       [](const SchemeSettings& s) { return s.virtual_stages >= 0; }},
      {"max_in_flight",
       {"chimera-zb"},
       "0 (= 2D) or chunk-activations held per worker, >= 2D",
       [](const SchemeSettings& s) { return number_given(s.max_in_flight, s.max_in_flight == 0); },
       [](const SchemeSettings& s) { return s.max_in_flight >= 0; }},
  };
  return table;
}

void check_scheme_settings(const SchemeSettings& settings) {
  for (const SchemeSetting& row : scheme_settings()) {
    const std::string value = row.given(settings);
    if (value.empty()) continue;
    const bool applies =
        std::find(row.schemes.begin(), row.schemes.end(), settings.scheme) != row.schemes.end();
    CHIMERA_REQUIRE(applies, "parallel.{} ({}) = {} applies to {} only (scheme is {})", row.key,
                    flag(row.key), value, fmt::join(row.schemes, ", "), settings.scheme);
    CHIMERA_REQUIRE(row.in_range(settings), "parallel.{} ({}) = {}: use {}", row.key, flag(row.key),
                    value, row.range);
  }
}

}  // namespace chimera
