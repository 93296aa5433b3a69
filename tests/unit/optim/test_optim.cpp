// AdamW against a double-precision transcription of torch.optim.AdamW, the decay mask, the
// clipping factor and the learning-rate schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/core/error.hpp"
#include "chimera/optim/adamw.hpp"
#include "chimera/optim/clip.hpp"
#include "chimera/optim/lr_schedule.hpp"

namespace chimera::optim {
namespace {

TEST(LrSchedule, WarmupThenCosineToMinLr) {
  const LrSchedule s{1e-3, 1e-4, 4, 20};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3 * 1 / 4);
  EXPECT_DOUBLE_EQ(s.at(2), 1e-3 * 3 / 4);
  EXPECT_DOUBLE_EQ(s.at(4), 1e-3);    // first step after warmup: the peak
  EXPECT_DOUBLE_EQ(s.at(19), 1e-4);   // last step: min_lr
  EXPECT_DOUBLE_EQ(s.at(100), 1e-4);  // beyond the schedule (resumed runs)
  // Half way through the decay: the mean of lr and min_lr.
  const LrSchedule even{1e-3, 1e-4, 0, 11};
  EXPECT_NEAR(even.at(5), 5.5e-4, 1e-15);
  for (int step = 4; step < 19; ++step) EXPECT_GT(s.at(step), s.at(step + 1)) << step;
  const LrSchedule no_warmup{1e-3, 0.0, 0, 1};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 1e-3);
}

TEST(Clip, TorchClipGradNormFactor) {
  EXPECT_EQ(clip_scale(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_scale(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_EQ(clip_scale(1e9, 0.0), 1.0);  // clipping off
}

TEST(AdamW, ThreeStepsMatchTorchFormulasWithDecayMaskAndGaps) {
  auto be = backend::make_backend(BackendKind::Cpu);
  const AdamWConfig c{0.9, 0.95, 1e-8, 0.1};
  const std::size_t n = 100;
  // [0, 40) decays, [40, 48) is an alignment gap, [48, 100) does not decay.
  const std::vector<ParamRange> ranges{{0, 40, true}, {48, 52, false}};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> p(n), g(n);
  for (auto& x : p) x = normal(rng);
  std::vector<double> ref_p(p.begin(), p.end()), ref_m(n, 0.0), ref_v(n, 0.0);
  AdamWMoments moments(*be, n);
  const double lrs[3] = {1e-2, 5e-3, 2e-3};
  const double scales[3] = {1.0, 0.5, 0.25};
  for (int t = 1; t <= 3; ++t) {
    for (auto& x : g) x = normal(rng);
    const double lr = lrs[t - 1], scale = scales[t - 1];
    for (std::size_t i = 0; i < n; ++i) {
      if (i >= 40 && i < 48) continue;
      const double gi = g[i] * scale;
      if (i < 40) ref_p[i] *= 1.0 - lr * c.weight_decay;
      ref_m[i] = c.beta1 * ref_m[i] + (1 - c.beta1) * gi;
      ref_v[i] = c.beta2 * ref_v[i] + (1 - c.beta2) * gi * gi;
      const double m_hat = ref_m[i] / (1 - std::pow(c.beta1, t));
      const double v_hat = ref_v[i] / (1 - std::pow(c.beta2, t));
      ref_p[i] -= lr * m_hat / (std::sqrt(v_hat) + c.eps);
    }
    adamw_step(*be, c, t, lr, scale, p.data(), g.data(), moments, ranges);
  }
  std::vector<float> m(n), v(n);
  be->copy_to_host(m.data(), moments.m.data(), n * sizeof(float));
  be->copy_to_host(v.data(), moments.v.data(), n * sizeof(float));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(p[i], ref_p[i], 1e-6 * (std::abs(ref_p[i]) + 1e-2)) << "param " << i;
    EXPECT_NEAR(m[i], ref_m[i], 1e-6 * (std::abs(ref_m[i]) + 1e-2)) << "exp_avg " << i;
    EXPECT_NEAR(v[i], ref_v[i], 1e-6 * (std::abs(ref_v[i]) + 1e-2)) << "exp_avg_sq " << i;
  }
}

// A sharded optimizer updates each shard of a buffer with the shard's moments and the tensors'
// decay ranges cut to the shard: the same bits as one update of the whole buffer.
TEST(AdamW, ShardsUpdatedApartEqualTheWholeUpdateBitwise) {
  auto be = backend::make_backend(BackendKind::Cpu);
  const AdamWConfig c{0.9, 0.95, 1e-8, 0.1};
  const std::size_t n = 100;
  const std::vector<ParamRange> ranges{{0, 40, true}, {48, 52, false}};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> whole(n), g(n);
  for (auto& x : whole) x = normal(rng);
  std::vector<float> sharded = whole;
  AdamWMoments moments(*be, n);
  // Shards of 35 floats: cuts inside the decayed range and inside the gap.
  const std::size_t cuts[] = {0, 35, 70, 100};
  std::vector<std::unique_ptr<AdamWMoments>> shard_moments;
  for (int i = 0; i < 3; ++i)
    shard_moments.push_back(std::make_unique<AdamWMoments>(*be, cuts[i + 1] - cuts[i]));
  EXPECT_EQ(shard_ranges(ranges, 35, 70).size(), 2U);  // [35, 40) decays, [48, 70) does not
  EXPECT_EQ(shard_ranges(ranges, 35, 70)[1].offset, 13U);
  for (int t = 1; t <= 3; ++t) {
    for (auto& x : g) x = normal(rng);
    adamw_step(*be, c, t, 1e-2, 0.5, whole.data(), g.data(), moments, ranges);
    for (int i = 0; i < 3; ++i) {
      adamw_step(*be, c, t, 1e-2, 0.5, sharded.data() + cuts[i], g.data() + cuts[i],
                 *shard_moments[static_cast<std::size_t>(i)],
                 shard_ranges(ranges, cuts[i], cuts[i + 1]));
    }
  }
  EXPECT_EQ(sharded, whole);
}

TEST(AdamW, ArgsAreBiasCorrected) {
  const AdamWConfig c{0.9, 0.95, 1e-8, 0.1};
  const auto a = adamw_args(c, 1, 1e-3, 0.5, true);
  EXPECT_FLOAT_EQ(a.step_size, static_cast<float>(1e-3 / 0.1));
  EXPECT_FLOAT_EQ(a.bias_correction2_sqrt, static_cast<float>(std::sqrt(0.05)));
  EXPECT_FLOAT_EQ(a.decay_factor, static_cast<float>(1.0 - 1e-4));
  EXPECT_EQ(a.grad_scale, 0.5F);
  EXPECT_EQ(adamw_args(c, 1, 1e-3, 1.0, false).decay_factor, 1.0F);
  EXPECT_THROW(adamw_args(c, 0, 1e-3, 1.0, true), Error);
}

TEST(Clip, SumOfSquares) {
  auto be = backend::make_backend(BackendKind::Cpu);
  const std::vector<float> g{3.0F, 4.0F, -12.0F};
  EXPECT_EQ(sum_of_squares(*be, g.data(), g.size()), 169.0);
}

}  // namespace
}  // namespace chimera::optim
