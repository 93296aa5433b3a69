#include "nonfinite_guard.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/model/parameters.hpp"

namespace chimera::runtime {

namespace {

// One line for a step whose loss or gradient norm is not finite, naming where it came from as
// far as it is known: the loss comes out of the last stage; a gradient turns non-finite in the
// backward pass, which runs from the last stage to the first, so the highest stage whose
// gradient is non-finite produced it (the tied embedding sums the first and last stages').
std::string describe_nonfinite(std::int64_t step, const LossAndNorm& v, int stages,
                               const std::vector<int>& bad_stages) {
  std::vector<std::string> parts;
  if (!std::isfinite(v.loss))
    parts.push_back(
        fmt::format("the loss is {} (computed by the last stage, {})", v.loss, stages - 1));
  if (!std::isfinite(v.grad_norm)) {
    std::string where;
    if (!bad_stages.empty()) {
      const int first = bad_stages.back();
      where = first == model::kTiedStage
                  ? " (first in the tied embedding wte)"
                  : fmt::format(
                        " (first in stage {}'s gradient, as the backward runs from the "
                        "last stage to the first)",
                        first);
    }
    parts.push_back(fmt::format("the gradient norm is {}{}", v.grad_norm, where));
  }
  return fmt::format("step {}: {}", step + 1, fmt::join(parts, " and "));
}

}  // namespace

LossAndNorm reduce_loss_and_norm(MPI_Comm world, const IterationResult& r, double grad_squares,
                                 const comm::WaitPolicy& policy, const comm::WaitLabel& label) {
  double local[3] = {r.loss_sum, static_cast<double>(r.loss_count), grad_squares};
  double total[3] = {0.0, 0.0, 0.0};
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ireduce(local, total, 3, MPI_DOUBLE, MPI_SUM, 0, world, &request));
  comm::wait(request, policy, nullptr, nullptr, nullptr, label);
  MPI_CHECK(MPI_Ibcast(total, 3, MPI_DOUBLE, 0, world, &request));
  comm::wait(request, policy, nullptr, nullptr, nullptr, label);
  return LossAndNorm{total[1] > 0 ? total[0] / total[1] : 0.0, std::sqrt(total[2])};
}

NonfiniteGuard::NonfiniteGuard(const TrainConfig& train, std::int64_t skipped_steps)
    : policy_(train.on_nonfinite),
      max_consecutive_(train.max_skipped_steps),
      skipped_steps_(skipped_steps) {}

NonfiniteGuard::Verdict NonfiniteGuard::judge(const LossAndNorm& v) {
  Verdict verdict;
  verdict.finite = v.finite();
  verdict.skip = !verdict.finite && policy_ == NonfinitePolicy::Skip;
  if (verdict.finite) {
    consecutive_ = 0;
  } else if (verdict.skip) {
    ++skipped_steps_;
    ++consecutive_;
  }
  return verdict;
}

void NonfiniteGuard::enforce(std::int64_t step, const LossAndNorm& v, int stages,
                             const std::vector<int>& bad_stages, const std::string& kept) const {
  if (v.finite()) return;
  // Every rank holds the same loss and norm, so every rank gets here in the same step.
  const std::string what = describe_nonfinite(step, v, stages, bad_stages);
  if (policy_ != NonfinitePolicy::Skip) {
    throw DivergedError(
        fmt::format("training diverged at {}; no update was applied and nothing of it saved{} "
                    "(train.on_nonfinite = skip would skip such steps)",
                    what, kept));
  }
  if (consecutive_ >= max_consecutive_) {
    throw DivergedError(
        fmt::format("training diverged: {} consecutive steps skipped (train.max_skipped_steps), "
                    "the last at {}{}",
                    consecutive_, what, kept));
  }
  log::warn_once("{}; update skipped ({} in a row, {} in all; train.on_nonfinite = skip)", what,
                 consecutive_, skipped_steps_);
}

}  // namespace chimera::runtime
