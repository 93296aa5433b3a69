#pragma once
// One direction of a host's link in the simulator: the intervals in which it carries a pipeline
// message's bytes.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace chimera::schedule::detail {

// The intervals are disjoint and sorted. Messages are booked in replay order, not time order, so
// a message takes the first gap long enough from its ready time on, which may lie before
// intervals booked already.
class LinkBookings {
 public:
  // The first t >= from at which [t, t + length) is free here.
  double first_free(double from, double length) const {
    double t = from;
    for (auto it = first_ending_after(from); it != busy_.end() && it->first < t + length; ++it)
      t = std::max(t, it->second);
    return t;
  }
  void book(double start, double length) {
    if (length <= 0) return;
    const std::pair<double, double> span{start, start + length};
    busy_.insert(std::upper_bound(busy_.begin(), busy_.end(), span), span);
  }
  // Whether a booked interval covers t.
  bool busy_at(double t) const {
    const auto it = first_ending_after(t);
    return it != busy_.end() && it->first <= t;
  }
  // The first moment after t at which busy_at changes (infinity: never).
  double next_change(double t) const {
    const auto it = first_ending_after(t);
    if (it == busy_.end()) return std::numeric_limits<double>::infinity();
    return it->first > t ? it->first : it->second;
  }

 private:
  // The first interval ending after t; the ends are sorted as the starts are.
  std::vector<std::pair<double, double>>::const_iterator first_ending_after(double t) const {
    return std::upper_bound(
        busy_.begin(), busy_.end(), t,
        [](double x, const std::pair<double, double>& b) { return x < b.second; });
  }
  std::vector<std::pair<double, double>> busy_;
};

}  // namespace chimera::schedule::detail
