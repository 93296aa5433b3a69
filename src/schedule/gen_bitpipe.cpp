// BitPipe (Wu et al., arXiv 2410.19367): two V-shaped pipelines running in opposite directions
// over the same D workers, as Chimera runs two straight ones. The model is cut into 2D chunks.
//
// Placement (two pipes of 2D stages):
//   down pipe  stage s on worker s for s < D, else on worker 2D-1-s (the V from worker 0);
//   up pipe    stage s on worker D-1-s for s < D, else on worker s-D (the V from worker D-1).
// Each stage has its two replicas on the mirror workers r and D-1-r, as in Chimera (2x weights),
// and each V turns on one worker (D-1 down, 0 up): a local hand-off, not a message.
// Micro-batch m runs down if (m mod D) < D/2, else up, so every unit of D consecutive
// micro-batches sends D/2 each way.
//
// Order (the reference generator's, wuhouming/BitPipe; full backward, F:B = 1:2 per chunk):
// worker r calls the pipe whose V starts nearer to it its own (down for r < D/2, up otherwise)
// and runs, per unit of D micro-batches, its forwards in this order, with h = D/2 and
// a = h - min(r, D-1-r) (how far the worker is from the middle, plus one):
//   a forwards of its own pipe's first leg;
//   h-a pairs: the other pipe's first leg, its own pipe's first leg;
//   a pairs: the other pipe's first leg, the other pipe's second leg;
//   h-a pairs: its own pipe's second leg, the other pipe's second leg;
//   a forwards of its own pipe's second leg;
// each leg taking its micro-batches in order. The backwards of the unit follow the same pattern
// with the legs swapped (a backward starts from the second leg). Forwards and backwards are
// interleaved as the reference does: a warm-up of 3D/2 + min(r, D-1-r) forwards, then per unit
// 2D - warm-up pairs of (next forward, next backward); between units the worker runs the
// unit's backwards up to one past its warm-up, then the next unit's forwards paired with the
// remaining backwards, then the rest of the next unit's warm-up; after the last unit, the
// remaining backwards. The per-worker peak is warm-up + 1 chunks' activations.
//
// bitpipe-zb: the same F order with every B split into I (in B's place) and W, the W ops filling
// the waits (split_backward.hpp), as chimera-zb does for Chimera.
#include <algorithm>
#include <string>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"
#include "split_backward.hpp"

namespace chimera::schedule {

namespace {

constexpr int kDown = 0;
constexpr int kUp = 1;

std::vector<int> up_v_placement(int D) {
  std::vector<int> p(static_cast<std::size_t>(2 * D));
  for (int s = 0; s < 2 * D; ++s) p[s] = s < D ? D - 1 - s : s - D;
  return p;
}

// The stage of `pipe` that worker r holds on the V's first (leg 0) or second (leg 1) leg.
int stage_on(int D, int r, int pipe, int leg) {
  if (pipe == kDown) return leg == 0 ? r : 2 * D - 1 - r;
  return leg == 0 ? D - 1 - r : D + r;
}

// One worker's compute order for one op kind over one unit: F ops walk the legs from the first,
// B ops from the second.
class UnitOrder {
 public:
  UnitOrder(const Schedule& s, int r) : D_(s.workers), r_(r) {
    const int h = D_ / 2;
    own_ = r < h ? kDown : kUp;
    a_ = h - std::min(r, D_ - 1 - r);
    for (int m = 0; m < s.schedule_micro_batches; ++m) mbs_[s.pipe_of[m]].push_back(m);
  }

  // The unit's 2D ops of `kind`, in the worker's order.
  std::vector<Op> ops(OpKind kind, int unit) const {
    const int h = D_ / 2;
    const int other = 1 - own_;
    const int first = kind == OpKind::F ? 0 : 1;  // the leg this kind starts from
    const int second = 1 - first;
    std::vector<Op> out;
    auto add = [&](int pipe, int leg, int i) {
      out.push_back({kind, pipe, stage_on(D_, r_, pipe, leg), {mbs_[pipe][unit * h + i]}});
    };
    for (int i = 0; i < a_; ++i) add(own_, first, i);
    for (int i = 0; i < h - a_; ++i) {
      add(other, first, i);
      add(own_, first, i + a_);
    }
    for (int i = 0; i < a_; ++i) {
      add(other, first, i + h - a_);
      add(other, second, i);
    }
    for (int i = 0; i < h - a_; ++i) {
      add(own_, second, i);
      add(other, second, i + a_);
    }
    for (int i = 0; i < a_; ++i) add(own_, second, i + h - a_);
    return out;
  }

 private:
  int D_, r_;
  int own_ = kDown;
  int a_ = 1;
  std::vector<int> mbs_[2];  // [pipe] its micro-batches in order
};

void lay_out_worker(Schedule& s, int r) {
  const int D = s.workers;
  const int units = s.schedule_micro_batches / D;
  const int warm_up = 3 * D / 2 + std::min(r, D - 1 - r);  // < 2D
  const int pairs = 2 * D - warm_up;
  const UnitOrder order(s, r);
  std::vector<Op> forwards, backwards;  // every unit's, in order
  for (int u = 0; u < units; ++u) {
    for (Op& op : order.ops(OpKind::F, u)) forwards.push_back(std::move(op));
    for (Op& op : order.ops(OpKind::B, u)) backwards.push_back(std::move(op));
  }
  auto& out = s.ops[r];
  std::size_t f = 0, b = 0;
  auto forward = [&] { out.push_back(forwards[f++]); };
  auto backward = [&] { out.push_back(backwards[b++]); };
  for (int i = 0; i < warm_up; ++i) forward();
  for (int u = 0; u < units; ++u) {
    for (int i = 0; i < pairs; ++i) {
      forward();
      backward();
    }
    if (u + 1 == units) break;
    for (int i = 0; i < warm_up - pairs + 1; ++i) backward();
    for (int i = 0; i < pairs - 1; ++i) {
      forward();
      backward();
    }
    for (int i = 0; i < warm_up - pairs + 1; ++i) forward();
  }
  while (b < backwards.size()) backward();
  CHIMERA_CHECK(f == forwards.size(), "bitpipe worker {} ran {} of {} forwards", r, f,
                forwards.size());
}

// BitPipe's schedule under the name `scheme`, its rules checked under that name.
Schedule reference_order(const std::string& scheme, int D, int N) {
  detail::require_pipeline(scheme, D, N, 4);
  CHIMERA_REQUIRE(D % 2 == 0,
                  "{} needs an even D (got D={}): half of each unit's micro-batches run down, "
                  "half up",
                  scheme, D);
  CHIMERA_REQUIRE(N % D == 0,
                  "{} needs N to be a multiple of D (got N={}, D={}): it concatenates units of D "
                  "micro-batches",
                  scheme, N, D);
  Schedule s =
      detail::make_shell(scheme, "", D, 2 * D, N, 1, {detail::v_placement(D), up_v_placement(D)});
  for (int m = 0; m < N; ++m) s.pipe_of[m] = m % D < D / 2 ? kDown : kUp;
  for (int r = 0; r < D; ++r) lay_out_worker(s, r);
  return s;
}

}  // namespace

Schedule bitpipe(int D, int N) {
  return reference_order("bitpipe", D, N);
}

Schedule bitpipe_zb(int D, int N) {
  // At most 2D chunks' activations per worker: D micro-batches through 1/D of the model, BitPipe's
  // own peak on its middle workers (and chimera-zb's and zb-v's default). The W ops are placed
  // for I = W = 3F/4, midway between F = B and B = 2F: placed for I = W = F (as chimera-zb's are),
  // they fill waits that F = B does not have and the order loses to BitPipe's there; placed for
  // I = W = F/2, it loses at B = 2F. Midway, it idles no more than the middle worker's start-up
  // wait at either ratio (tests/unit/schedule/test_bitpipe.cpp).
  return detail::split_backward_filling_waits(reference_order("bitpipe-zb", D, N), 2 * D,
                                              {1.0, 0.75, 0.75});
}

}  // namespace chimera::schedule
