#include "binomial_sums.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "chimera/core/error.hpp"

namespace chimera::schedule::detail {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
// A link's flows' weights left to fix below this: none (weights are powers of a weight <= 1 of
// at most a few ranks, so far above it).
constexpr double kNoWeight = 1e-9;

// v[i] for the int indices of messages, links and sums.
template <class V>
auto& at(V& v, int i) {
  return v[static_cast<std::size_t>(i)];
}

// (time, index), earliest first.
using Event = std::pair<double, int>;
using Earliest = std::priority_queue<Event, std::vector<Event>, std::greater<>>;

struct Message {
  int sum = 0;
  int from = 0, to = 0;         // sender and receiver world ranks
  std::int64_t connection = 0;  // both, as one key
  int out = -1, in = -1;        // the link directions it crosses; -1: through memory
  double left = 0;              // link time still to move, or its time in memory
  double total = 0;
  int unmet = 0;         // messages it waits for that have not arrived
  double available = 0;  // when its sender posts it
  double end = kNever;   // when it has arrived
  std::vector<int> dependents;
};

// The messages of every sum, each waiting for those its sender (and, in the reduce, its
// receiver) must have had first.
class SumMessages {
 public:
  SumMessages(const std::vector<BinomialSum>& sums, const Costs& c, int hosts) : c_(c) {
    for (std::size_t s = 0; s < sums.size(); ++s) add_sum(static_cast<int>(s), sums[s], hosts);
  }
  std::vector<Message>& all() { return m_; }

 private:
  void add_sum(int s, const BinomialSum& sum, int hosts) {
    const int p = static_cast<int>(sum.ranks.size());
    CHIMERA_REQUIRE(
        sum.rank_ready.size() == sum.ranks.size() && sum.hosts.size() == sum.ranks.size(),
        "a sum of {} ranks with {} start times and {} hosts", p, sum.rank_ready.size(),
        sum.hosts.size());
    // The reduce: in round k rank i + 2^(k-1) sends its partial sum to rank i (i a multiple of
    // 2^k), which receives its rounds in turn.
    std::vector<std::vector<int>> into(static_cast<std::size_t>(p));
    for (int k = 1; (1 << (k - 1)) < p; ++k) {
      for (int i = 0; i + (1 << (k - 1)) < p; i += 1 << k) {
        const int from = i + (1 << (k - 1));
        std::vector<int> after = into[from];
        after.insert(after.end(), into[i].begin(), into[i].end());
        into[i].push_back(add(s, sum, from, i, after, hosts));
      }
    }
    // The broadcast: a rank with the sum sends it to every child v + 2^r (2^r > v) at once.
    std::vector<std::vector<int>> has_sum(static_cast<std::size_t>(p));
    if (p > 1) has_sum[0] = into[0];
    for (int v = 0; v < p; ++v) {
      for (int step = 1; v + step < p; step <<= 1) {
        if (step <= v) continue;
        has_sum[v + step] = {add(s, sum, v, v + step, has_sum[v], hosts)};
      }
    }
  }

  int add(int s, const BinomialSum& sum, int from, int to, const std::vector<int>& after,
          int hosts) {
    Message msg;
    msg.sum = s;
    msg.from = sum.ranks[from];
    msg.to = sum.ranks[to];
    msg.connection = static_cast<std::int64_t>(msg.from) * (std::int64_t{1} << 32) + msg.to;
    const int a = sum.hosts[from], b = sum.hosts[to];
    CHIMERA_REQUIRE(a >= 0 && a < hosts && b >= 0 && b < hosts,
                    "a sum's rank on host {} or {} of {}", a, b, hosts);
    if (a == b) {
      msg.left = c_.host_alpha + c_.host_beta * sum.bytes;
    } else {
      msg.out = a;
      msg.in = b;
      msg.left = c_.beta * sum.bytes;
    }
    msg.total = msg.left;
    msg.available = at(sum.rank_ready, from);
    msg.unmet = static_cast<int>(after.size());
    const int id = static_cast<int>(m_.size());
    for (const int d : after) at(m_, d).dependents.push_back(id);
    m_.push_back(std::move(msg));
    return id;
  }

  const Costs& c_;
  std::vector<Message> m_;
};

}  // namespace

std::vector<double> binomial_sums_end(const std::vector<BinomialSum>& sums, const Costs& c,
                                      const std::vector<LinkBookings>& out,
                                      const std::vector<LinkBookings>& in) {
  const int hosts = static_cast<int>(out.size());
  SumMessages built(sums, c, hosts);
  std::vector<Message>& m = built.all();
  std::vector<double> ends(sums.size());
  for (std::size_t s = 0; s < sums.size(); ++s) ends[s] = sums[s].ready;

  // Link messages whose predecessors have arrived, by the time their sender posts them; a
  // connection moves one message at a time, the one posted first (ties: the order the sums were
  // given), and queues the others.
  Earliest posted;                                           // (when posted, message)
  std::unordered_map<std::int64_t, std::deque<int>> queued;  // per connection moving a message
  std::vector<int> settled;
  // A message has arrived: its dependents whose predecessors have all arrived are posted, and
  // one through memory arrives after its time, and so on down its dependents.
  const auto arrived = [&](int id, double when) {
    at(m, id).end = when;
    settled.assign(1, id);
    while (!settled.empty()) {
      const Message& done = at(m, settled.back());
      settled.pop_back();
      at(ends, done.sum) = std::max(at(ends, done.sum), done.end);
      for (const int d : done.dependents) {
        Message& next = at(m, d);
        next.available = std::max(next.available, done.end);
        if (--next.unmet > 0) continue;
        if (next.out < 0) {
          next.end = next.available + next.left;
          settled.push_back(d);
        } else {
          posted.emplace(next.available, d);
        }
      }
    }
  };
  for (std::size_t i = 0; i < m.size(); ++i) {
    Message& msg = m[i];
    if (msg.unmet > 0) continue;
    if (msg.out < 0) {
      arrived(static_cast<int>(i), msg.available + msg.left);
    } else {
      posted.emplace(msg.available, static_cast<int>(i));
    }
  }

  // Link directions: 2h outgoing, 2h + 1 incoming. Only the flows of a changed link's connected
  // part (flows and the links they cross) get new rates; a flow's bytes left are brought up to
  // date when its rate changes.
  const auto booked = [&](int link) -> const LinkBookings& {
    return link % 2 == 0 ? at(out, link / 2) : at(in, link / 2);
  };
  const auto links_of = [&](int id) {
    const Message& msg = at(m, id);
    return std::array<int, 2>{2 * msg.out, 2 * msg.in + 1};
  };
  std::vector<std::vector<int>> crossing(static_cast<std::size_t>(2 * hosts));
  std::vector<double> capacity(static_cast<std::size_t>(2 * hosts), 0.0);
  std::vector<double> unfixed(static_cast<std::size_t>(2 * hosts), 0);  // their weights' sum
  std::vector<double> change_at(static_cast<std::size_t>(2 * hosts), kNever);
  std::vector<char> seen(static_cast<std::size_t>(2 * hosts), 0);
  std::vector<double> rate(m.size(), 0.0), since(m.size(), 0.0);
  // [message] its weight on its outgoing and its incoming link direction (Costs::later_rank_weight)
  std::vector<std::array<double, 2>> weight(m.size(), {1.0, 1.0});
  const auto weight_on = [&](int link, int id) -> double& { return at(weight, id)[link % 2]; };
  // When each sum started: its first rank's start.
  std::vector<double> started(sums.size());
  for (std::size_t s = 0; s < sums.size(); ++s)
    started[s] = *std::min_element(sums[s].rank_ready.begin(), sums[s].rank_ready.end());
  // The weights of the flows crossing `link` now, and their sum: the host's ranks on it (the
  // senders going out, the receivers coming in) ordered by their earliest sum's start, then rank.
  std::vector<std::pair<double, int>> ranks_on_link;
  const auto weigh = [&](int link) {
    const auto& flows = at(crossing, link);
    if (c.later_rank_weight >= 1.0) {
      for (const int id : flows) weight_on(link, id) = 1.0;
      return static_cast<double>(flows.size());
    }
    const auto rank_of = [&](int id) { return link % 2 == 0 ? at(m, id).from : at(m, id).to; };
    ranks_on_link.clear();
    for (const int id : flows) {
      const int r = rank_of(id);
      const double start = at(started, at(m, id).sum);
      const auto it = std::find_if(ranks_on_link.begin(), ranks_on_link.end(),
                                   [r](const auto& e) { return e.second == r; });
      if (it == ranks_on_link.end()) {
        ranks_on_link.emplace_back(start, r);
      } else {
        it->first = std::min(it->first, start);
      }
    }
    std::sort(ranks_on_link.begin(), ranks_on_link.end());
    double total = 0;
    for (const int id : flows) {
      const int r = rank_of(id);
      const auto place = std::find_if(ranks_on_link.begin(), ranks_on_link.end(),
                                      [r](const auto& e) { return e.second == r; }) -
                         ranks_on_link.begin();
      weight_on(link, id) = std::pow(c.later_rank_weight, static_cast<double>(place));
      total += weight_on(link, id);
    }
    return total;
  };
  std::vector<std::uint32_t> version(m.size(), 0);
  Earliest changes;  // (time, link): a booked interval on the link starts or ends
  std::priority_queue<std::tuple<double, std::uint32_t, int>,
                      std::vector<std::tuple<double, std::uint32_t, int>>, std::greater<>>
      finishes;  // (time, version, message)
  Earliest by_share;
  std::vector<int> dirty, part_links, part_flows, finished;
  const auto start_moving = [&](int id, double now) {
    at(since, id) = now;
    at(rate, id) = 0;
    for (const int link : links_of(id)) {
      at(crossing, link).push_back(id);
      dirty.push_back(link);
    }
  };
  // New weighted max-min fair rates for the connected part of the dirty links (progressive
  // filling: the link offering the smallest share per unit of weight fixes the rates of its
  // flows, which leave the other link they cross with that much less).
  const auto share_again = [&](double now) {
    part_links.clear();
    part_flows.clear();
    for (const int link : dirty) {
      if (at(seen, link) || at(crossing, link).empty()) continue;
      at(seen, link) = 1;
      part_links.push_back(link);
    }
    dirty.clear();
    for (std::size_t i = 0; i < part_links.size(); ++i) {
      for (const int id : at(crossing, part_links[i])) {
        if (at(rate, id) < 0) continue;  // reached already
        Message& msg = at(m, id);
        msg.left -= at(rate, id) * (now - at(since, id));
        at(since, id) = now;
        at(rate, id) = -1;
        part_flows.push_back(id);
        for (const int other : links_of(id)) {
          if (at(seen, other)) continue;
          at(seen, other) = 1;
          part_links.push_back(other);
        }
      }
    }
    const auto share_of = [&](int link) {
      return std::max(0.0, at(capacity, link)) / at(unfixed, link);
    };
    for (const int link : part_links) {
      at(seen, link) = 0;
      at(capacity, link) = booked(link).busy_at(now) ? 0.0 : 1.0;
      at(unfixed, link) = weigh(link);
      by_share.emplace(share_of(link), link);
      if (const double change = booked(link).next_change(now); change != at(change_at, link)) {
        at(change_at, link) = change;
        if (change < kNever) changes.emplace(change, link);
      }
    }
    while (!by_share.empty()) {
      const auto [share, link] = by_share.top();
      by_share.pop();
      if (at(unfixed, link) <= kNoWeight || share != share_of(link)) continue;
      for (const int id : at(crossing, link)) {
        double& r = at(rate, id);
        if (r >= 0) continue;
        r = share * weight_on(link, id);
        for (const int other : links_of(id)) {
          at(capacity, other) -= r;
          at(unfixed, other) -= weight_on(other, id);
          if (at(unfixed, other) > kNoWeight && other != link)
            by_share.emplace(share_of(other), other);
        }
      }
    }
    for (const int id : part_flows) {
      const double r = at(rate, id);
      ++at(version, id);
      if (r > 0) finishes.emplace(now + at(m, id).left / r, at(version, id), id);
    }
  };

  // A rate change leaves the message's earlier finish behind, with an older version.
  const auto drop_stale_finishes = [&] {
    while (!finishes.empty() &&
           std::get<1>(finishes.top()) != at(version, std::get<2>(finishes.top())))
      finishes.pop();
  };

  for (double t = posted.empty() ? kNever : posted.top().first; t < kNever;) {
    // What happens at t: messages posted (each connection moves one at a time), messages through,
    // bookings starting or ending.
    while (!posted.empty() && posted.top().first <= t) {
      const int id = posted.top().second;
      posted.pop();
      auto [it, idle] = queued.try_emplace(at(m, id).connection);
      if (idle) {
        start_moving(id, t);
      } else {
        it->second.push_back(id);
      }
    }
    while (!changes.empty() && changes.top().first <= t) {
      const int link = changes.top().second;
      changes.pop();
      if (at(change_at, link) <= t) {
        at(change_at, link) = kNever;
        dirty.push_back(link);
      }
    }
    finished.clear();
    for (drop_stale_finishes(); !finishes.empty(); drop_stale_finishes()) {
      const int id = std::get<2>(finishes.top());
      if (std::get<0>(finishes.top()) > t + 1e-9 * at(m, id).total) break;
      finishes.pop();
      finished.push_back(id);
    }
    for (const int id : finished) {
      ++at(version, id);
      at(m, id).left = 0;
      for (const int link : links_of(id)) {
        std::erase(at(crossing, link), id);
        dirty.push_back(link);
      }
      // The connection moves the next message it has queued, or falls idle.
      const auto it = queued.find(at(m, id).connection);
      if (it->second.empty()) {
        queued.erase(it);
      } else {
        start_moving(it->second.front(), t);
        it->second.pop_front();
      }
      arrived(id, t + c.alpha);
    }
    // Messages posted by the arrivals at t itself join before the rates are shared again.
    if (!posted.empty() && posted.top().first <= t) continue;
    share_again(t);
    double next = posted.empty() ? kNever : posted.top().first;
    if (!changes.empty()) next = std::min(next, changes.top().first);
    drop_stale_finishes();
    if (!finishes.empty()) next = std::min(next, std::get<0>(finishes.top()));
    CHIMERA_REQUIRE(next < kNever || queued.empty(),
                    "the sums' messages cannot move (no link is ever free)");
    t = next;
  }
  return ends;
}

}  // namespace chimera::schedule::detail

namespace chimera::schedule {

std::vector<double> concurrent_sums_end(const std::vector<SumGroup>& sums,
                                        const std::vector<int>& host_of, const Costs& costs) {
  std::vector<detail::BinomialSum> priced;
  int hosts = 1;
  for (const int h : host_of) hosts = std::max(hosts, h + 1);
  for (const SumGroup& g : sums) {
    detail::BinomialSum& b = priced.emplace_back();
    b.bytes = g.bytes;
    b.ranks = g.ranks;
    b.rank_ready.assign(g.ranks.size(), 0.0);
    for (const int r : g.ranks) {
      CHIMERA_REQUIRE(r >= 0 && static_cast<std::size_t>(r) < host_of.size(),
                      "a sum's rank {} is not one of the {} ranks", r, host_of.size());
      b.hosts.push_back(host_of[static_cast<std::size_t>(r)]);
    }
  }
  const std::vector<detail::LinkBookings> idle(static_cast<std::size_t>(hosts));
  return detail::binomial_sums_end(priced, costs, idle, idle);
}

}  // namespace chimera::schedule
