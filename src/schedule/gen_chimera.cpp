// Chimera (Li & Hoefler, SC'21, §3.2-3.5): 2f pipelines over the same D workers, f down and f up.
//
// Placement: down pipe k puts stage s on worker (s + k*D/f) mod D, up pipe k on the mirror
// worker D-1-(s + k*D/f) mod D. With f = 1 this is the paper's pair: worker p holds stage p of
// the down pipe and stage D-1-p of the up pipe. A worker never holds the same stage twice
// (D/f is even), so every worker holds 2f distinct stage replicas.
//
// direct: micro-batches are laid out on unit time slots (F = B = 1) as stall-free "waves": a
// micro-batch injected at slot t runs F at stage s in slot t+s and B at stage s in slot
// t+2D-1-s. Micro-batches are injected pipe by pipe in turn, each at the first slot where its
// wave collides with nothing already placed. For N = D this is exactly the paper's schedule
// (injections at slots 0, 2, 4, ... in both directions, D-2 idle slots per worker, D/f-2 with
// 2f pipes); for N = kD the units follow each other 2D slots apart, the next unit's forwards
// filling the previous unit's backward tail, and the idle slots stay D-2.
//
// doubling / halving: forward ops cover two (half) micro-batches, so with B = 2F a forward slot
// costs what a backward slot does. Waves no longer tile, so the slots are filled by list
// scheduling on unit slots: each free worker runs, among its ready ops, forwards before
// backwards, older micro-batches first, lower pipes first; a stage keeps at most D/f micro-
// batches in flight before it may start another forward. For N >= 2D (halving: N >= D) this
// leaves D/f-2 idle slots per worker, like the N = D unit. Doubling holds twice the activations
// of the N = D unit; halving, whose micro-batches are half as large, the same.
#include <limits>
#include <optional>
#include <tuple>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

namespace {

using detail::SlottedOp;

std::vector<std::vector<int>> chimera_placement(int D, int f) {
  const int block = D / f;
  std::vector<std::vector<int>> placement;
  for (int k = 0; k < f; ++k) {
    std::vector<int> down(static_cast<std::size_t>(D));
    for (int s = 0; s < D; ++s) down[s] = (s + k * block) % D;
    placement.push_back(std::move(down));
  }
  for (int k = 0; k < f; ++k) {
    std::vector<int> up(static_cast<std::size_t>(D));
    for (int s = 0; s < D; ++s) up[s] = D - 1 - (s + k * block) % D;
    placement.push_back(std::move(up));
  }
  return placement;
}

// Which slots of each worker are taken; grows as waves are placed.
class SlotMap {
 public:
  explicit SlotMap(int workers) : taken_(static_cast<std::size_t>(workers)) {}
  bool taken(int worker, std::int64_t slot) const {
    const auto& row = taken_[worker];
    return slot < static_cast<std::int64_t>(row.size()) && row[static_cast<std::size_t>(slot)];
  }
  void take(int worker, std::int64_t slot) {
    auto& row = taken_[worker];
    if (slot >= static_cast<std::int64_t>(row.size())) {
      row.resize(static_cast<std::size_t>(slot) * 2 + 16, 0);
    }
    row[static_cast<std::size_t>(slot)] = 1;
  }

 private:
  std::vector<std::vector<char>> taken_;
};

void lay_out_waves(Schedule& s) {
  const int D = s.workers;
  const int pipes = s.pipes();
  const int per_pipe = s.schedule_micro_batches / pipes;
  // A wave's slots relative to its injection: F at stage st in +st, B in +2D-1-st.
  auto forward_slot = [](int st) { return std::int64_t{st}; };
  auto backward_slot = [D](int st) { return std::int64_t{2} * D - 1 - st; };

  SlotMap map(D);
  std::vector<std::int64_t> next_injection(static_cast<std::size_t>(pipes), 0);
  std::vector<std::vector<SlottedOp>> laid(static_cast<std::size_t>(D));
  for (int i = 0; i < per_pipe; ++i) {
    for (int p = 0; p < pipes; ++p) {
      const auto& place = s.placement[p];
      auto collides = [&](std::int64_t t) {
        for (int st = 0; st < D; ++st) {
          if (map.taken(place[st], t + forward_slot(st)) ||
              map.taken(place[st], t + backward_slot(st))) {
            return true;
          }
        }
        return false;
      };
      std::int64_t t = next_injection[p];
      while (collides(t)) ++t;
      next_injection[p] = t + 1;
      const int mb = p * per_pipe + i;
      for (int st = 0; st < D; ++st) {
        map.take(place[st], t + forward_slot(st));
        map.take(place[st], t + backward_slot(st));
        laid[place[st]].push_back({t + forward_slot(st), {OpKind::F, p, st, {mb}}});
        laid[place[st]].push_back({t + backward_slot(st), {OpKind::B, p, st, {mb}}});
      }
    }
  }
  detail::order_by_slot(s, std::move(laid));
}

void lay_out_paired_forwards(Schedule& s, int in_flight_limit) {
  const int D = s.workers;
  const int pipes = s.pipes();
  const int per_pipe = s.schedule_micro_batches / pipes;  // even: forwards run in pairs
  const int pairs = per_pipe / 2;
  constexpr std::int64_t kNotYet = std::numeric_limits<std::int64_t>::max();

  // Per (pipe, stage): forward pairs and backwards done, and when each ended.
  struct StageState {
    int forwards = 0;
    int backwards = 0;
    std::vector<std::int64_t> forward_end;   // [pair]
    std::vector<std::int64_t> backward_end;  // [local micro-batch]
  };
  std::vector<std::vector<StageState>> state(static_cast<std::size_t>(pipes),
                                             std::vector<StageState>(static_cast<std::size_t>(D)));
  // The (pipe, stage) replicas each worker holds, pipes in order.
  std::vector<std::vector<std::pair<int, int>>> held(static_cast<std::size_t>(D));
  for (int p = 0; p < pipes; ++p) {
    for (int st = 0; st < D; ++st) {
      state[p][st].forward_end.assign(static_cast<std::size_t>(pairs), kNotYet);
      state[p][st].backward_end.assign(static_cast<std::size_t>(per_pipe), kNotYet);
      held[s.placement[p][st]].emplace_back(p, st);
    }
  }

  std::vector<std::vector<SlottedOp>> laid(static_cast<std::size_t>(D));
  std::int64_t remaining = std::int64_t{pipes} * D * (pairs + per_pipe);
  const std::int64_t give_up = 4 * remaining + 4 * D + 16;  // a bug, not a long schedule
  for (std::int64_t t = 0; remaining > 0; ++t) {
    CHIMERA_CHECK(t < give_up, "chimera {} list scheduling made no progress by slot {}", s.variant,
                  t);
    for (int w = 0; w < D; ++w) {
      // Best ready op: forwards first, then the oldest micro-batch, then the lowest pipe.
      struct Choice {
        bool forward;
        int local;
        int pipe;
        int stage;
      };
      std::optional<Choice> best;
      auto consider = [&](const Choice& c) {
        auto key = [](const Choice& x) { return std::tuple(!x.forward, x.local, x.pipe); };
        if (!best || key(c) < key(*best)) best = c;
      };
      for (const auto& [p, st] : held[w]) {
        const StageState& here = state[p][st];
        const int k = here.forwards;
        if (k < pairs && 2 * k - here.backwards < in_flight_limit &&
            (st == 0 || state[p][st - 1].forward_end[k] <= t)) {
          consider({true, 2 * k, p, st});
        }
        const int m = here.backwards;
        if (m < 2 * here.forwards &&
            (st == D - 1 ? here.forward_end[m / 2] <= t : state[p][st + 1].backward_end[m] <= t)) {
          consider({false, m, p, st});
        }
      }
      if (!best) continue;
      StageState& here = state[best->pipe][best->stage];
      const int first = best->pipe * per_pipe;
      if (best->forward) {
        const int k = here.forwards++;
        here.forward_end[k] = t + 1;
        laid[w].push_back(
            {t, {OpKind::F, best->pipe, best->stage, {first + 2 * k, first + 2 * k + 1}}});
      } else {
        const int m = here.backwards++;
        here.backward_end[m] = t + 1;
        laid[w].push_back({t, {OpKind::B, best->pipe, best->stage, {first + m}}});
      }
      --remaining;
    }
  }
  detail::order_by_slot(s, std::move(laid));
}

}  // namespace

Schedule chimera(int D, int N, const std::string& variant, int pipes) {
  detail::require_pipeline("chimera", D, N);
  CHIMERA_REQUIRE(D % 2 == 0,
                  "chimera needs an even D (got D={}): the down and up pipelines merge without "
                  "conflicts only for an even number of stages",
                  D);
  CHIMERA_REQUIRE(N % 2 == 0,
                  "chimera needs an even N (got N={}): half the micro-batches run down, half up",
                  N);
  CHIMERA_REQUIRE(pipes >= 2 && pipes % 2 == 0,
                  "chimera needs pipes = 2f, an even number >= 2 (got pipes={})", pipes);
  const int f = pipes / 2;
  CHIMERA_REQUIRE((D / 2) % f == 0,
                  "chimera with pipes = 2f = {} needs f = {} to divide D/2 = {}: use pipes = 2, 4, "
                  "... with f dividing D/2",
                  pipes, f, D / 2);
  CHIMERA_REQUIRE(variant == "direct" || variant == "doubling" || variant == "halving",
                  "unknown chimera variant '{}': use direct, doubling or halving", variant);
  const int in_flight_limit = D / f;
  if (variant == "direct") {
    CHIMERA_REQUIRE(
        N % D == 0,
        "chimera direct needs N to be a multiple of D (got N={}, D={}): it concatenates "
        "units of D micro-batches",
        N, D);
    Schedule s = detail::make_shell("chimera", variant, D, D, N, 1, chimera_placement(D, f));
    lay_out_waves(s);
    return s;
  }
  CHIMERA_REQUIRE(N % pipes == 0,
                  "chimera {} with {} pipes needs N to be a multiple of {} (got N={}): every pipe "
                  "runs the same number of micro-batches",
                  variant, pipes, pipes, N);
  if (variant == "doubling") {
    CHIMERA_REQUIRE((N / pipes) % 2 == 0,
                    "chimera doubling needs an even number of micro-batches per pipe (got N/pipes "
                    "= {}): forwards run them in pairs; use N a multiple of {}",
                    N / pipes, 2 * pipes);
    Schedule s = detail::make_shell("chimera", variant, D, D, N, 1, chimera_placement(D, f));
    lay_out_paired_forwards(s, in_flight_limit);
    return s;
  }
  // halving: 2N half micro-batches; a forward covers both halves of one micro-batch.
  Schedule s = detail::make_shell("chimera", variant, D, D, 2 * N, 2, chimera_placement(D, f));
  lay_out_paired_forwards(s, in_flight_limit);
  return s;
}

}  // namespace chimera::schedule
