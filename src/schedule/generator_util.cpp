#include "generator_util.hpp"

#include <algorithm>

#include "chimera/core/error.hpp"

namespace chimera::schedule::detail {

namespace {
constexpr int kMaxStages = 4096;
constexpr int kMaxMicroBatches = 1 << 20;
constexpr std::int64_t kMaxCells = std::int64_t{1} << 24;
}  // namespace

void require_pipeline(const std::string& scheme, int D, int N, int stages_per_worker,
                      int min_stages) {
  CHIMERA_REQUIRE(D >= min_stages, "{} needs D >= {} stages (got D={}){}", scheme, min_stages, D,
                  min_stages == 1 ? "" : ": for one process without a pipeline use gpipe or 1f1b");
  CHIMERA_REQUIRE(D <= kMaxStages, "{} supports D <= {} stages (got D={})", scheme, kMaxStages, D);
  CHIMERA_REQUIRE(N >= 1, "{} needs N >= 1 micro-batches (got N={})", scheme, N);
  CHIMERA_REQUIRE(N <= kMaxMicroBatches, "{} supports N <= {} micro-batches (got N={})", scheme,
                  kMaxMicroBatches, N);
  const std::int64_t cells = std::int64_t{D} * stages_per_worker * N;
  CHIMERA_REQUIRE(cells <= kMaxCells,
                  "{} with D={}, N={} has {} (stage, micro-batch) pairs, more than the {} a "
                  "schedule may hold",
                  scheme, D, N, cells, kMaxCells);
}

Schedule make_shell(std::string scheme, std::string variant, int D, int stages, int micro_batches,
                    int mb_split, std::vector<std::vector<int>> placement) {
  Schedule s;
  s.scheme = std::move(scheme);
  s.variant = std::move(variant);
  s.workers = D;
  s.stages = stages;
  s.schedule_micro_batches = micro_batches;
  s.mb_split = mb_split;
  s.placement = std::move(placement);
  const int per_pipe = micro_batches / s.pipes();
  CHIMERA_CHECK(per_pipe * s.pipes() == micro_batches,
                "{} micro-batches do not split over {} pipes", micro_batches, s.pipes());
  s.pipe_of.resize(static_cast<std::size_t>(micro_batches));
  for (int m = 0; m < micro_batches; ++m) s.pipe_of[m] = m / per_pipe;
  s.ops.resize(static_cast<std::size_t>(D));
  return s;
}

std::vector<int> down_placement(int D) {
  std::vector<int> p(static_cast<std::size_t>(D));
  for (int s = 0; s < D; ++s) p[s] = s;
  return p;
}

std::vector<int> up_placement(int D) {
  std::vector<int> p(static_cast<std::size_t>(D));
  for (int s = 0; s < D; ++s) p[s] = D - 1 - s;
  return p;
}

std::vector<int> v_placement(int D) {
  std::vector<int> p(static_cast<std::size_t>(2 * D));
  for (int s = 0; s < 2 * D; ++s) p[s] = s < D ? s : 2 * D - 1 - s;
  return p;
}

void order_by_slot(Schedule& schedule, std::vector<std::vector<SlottedOp>> per_worker) {
  CHIMERA_CHECK(static_cast<int>(per_worker.size()) == schedule.workers, "{} workers laid out, {}",
                per_worker.size(), schedule.workers);
  for (int w = 0; w < schedule.workers; ++w) {
    auto& ops = per_worker[w];
    std::stable_sort(ops.begin(), ops.end(),
                     [](const SlottedOp& a, const SlottedOp& b) { return a.slot < b.slot; });
    schedule.ops[w].clear();
    schedule.ops[w].reserve(ops.size());
    for (auto& o : ops) schedule.ops[w].push_back(std::move(o.op));
  }
}

}  // namespace chimera::schedule::detail
