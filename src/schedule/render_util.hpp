#pragma once
// Small formatting helpers the renderers share.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule::detail {

// "3 4 4 3": numbers in their shortest exact form.
inline std::string join_numbers(const std::vector<double>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += fmt::format("{}{:g}", i ? " " : "", values[i]);
  return out;
}

// "3-4", or "4" when all are equal.
inline std::string min_max(const std::vector<double>& values) {
  if (values.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return *lo == *hi ? fmt::format("{:g}", *lo) : fmt::format("{:g}-{:g}", *lo, *hi);
}

inline bool has_split_backward(const Schedule& s) {
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      if (op.kind == OpKind::I || op.kind == OpKind::W) return true;
    }
  }
  return false;
}

}  // namespace chimera::schedule::detail
