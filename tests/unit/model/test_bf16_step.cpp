// One training step (forward + backward) of a small GPT-2 with bf16 GEMMs against the same step in
// fp32: logits and every gradient tensor within bf16's rounding (bf16_step_tolerance.hpp explains
// the tolerance), the loss within what the logits' error allows, and not bit-equal to fp32, so a
// path that silently stayed in fp32 fails. bf16-emulated runs on every CPU; bf16 (oneDNN) skips,
// saying why, on a CPU without bf16 units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bf16_step_tolerance.hpp"
#include "chimera/model/worker.hpp"
#include "cpu_precision.hpp"
#include "tolerance.hpp"

namespace chimera::model {
namespace {

using testing::kBf16StepMinError;
using testing::kBf16StepTol;

struct Step {
  float loss = 0;
  std::vector<float> logits;                        // B*T rows of V
  std::map<std::string, std::vector<float>> grads;  // by Hugging Face name
};

constexpr int kB = 2, kT = 32, kV = 101;

// One step of a 2-block GPT-2 (C = 64, 4 heads) on one worker at runtime.precision `precision`.
Step train_step(const std::string& precision) {
  backend::BackendOptions options;
  options.precision = precision;
  const auto be = backend::make_backend(BackendKind::Cpu, options);
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_embd = 64;
  mc.n_head = 4;
  mc.n_ctx = kT;
  mc.vocab_size = kV;
  GPT2Worker worker(*be, GPT2Config::from(mc), StagePartition({2}), {0}, {kB, kT, false});
  worker.init_parameters(5);
  worker.zero_grad();
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int32_t> token(0, kV - 1);
  std::vector<std::int32_t> tokens(kB * kT), targets(kB * kT);
  for (auto* ids : {&tokens, &targets}) {
    for (auto& t : *ids) t = token(rng);
  }
  Step s;
  s.loss = worker.forward(0, 0, {tokens, nullptr, targets, 1.0F}, nullptr);
  s.logits.resize(static_cast<std::size_t>(kB * kT * kV));
  worker.logits(0, s.logits);
  worker.backward(0, 0, nullptr, nullptr);
  worker.finalize_tied_grads();
  for (const TensorInfo* t : worker.tensors()) {
    std::vector<float> g(t->numel);
    worker.read_tensor(*t, worker.grads_of(*t), g);
    s.grads.emplace(t->name, std::move(g));
  }
  return s;
}

double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double err_sq = 0, ref_sq = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    err_sq += d * d;
    ref_sq += static_cast<double>(expected[i]) * expected[i];
  }
  return std::sqrt(err_sq / ref_sq);
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Parameter: runtime.precision with bf16 GEMMs.
class Bf16Step : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    CHIMERA_SKIP_UNLESS_CPU_RUNS(GetParam());
    bf16_ = train_step(GetParam());
    if (!fp32_) fp32_ = std::make_unique<Step>(train_step("fp32"));  // once per process
  }

  static void TearDownTestSuite() { fp32_.reset(); }

  static inline std::unique_ptr<Step> fp32_;
  Step bf16_;
};

TEST_P(Bf16Step, LossLogitsAndEveryGradientWithinBf16Rounding) {
  const Step& fp32 = *fp32_;
  expect_close_norm(bf16_.logits, fp32.logits, kBf16StepTol, "logits");
  // The loss is a mean over rows of logsumexp(z) - z[target], whose gradient in z (p - onehot)
  // has a 1-norm of at most 2: the loss moves by at most the mean over rows of 2 max |dz|, plus
  // fp32 rounding. (A direct relative bound would be loose: at init the logits are small and the
  // loss, ~log V, barely depends on them.)
  double bound = 0;
  for (int r = 0; r < kB * kT; ++r) {
    float worst = 0;
    for (int j = 0; j < kV; ++j) {
      const auto i = static_cast<std::size_t>(r * kV + j);
      worst = std::max(worst, std::abs(bf16_.logits[i] - fp32.logits[i]));
    }
    bound += 2.0 * worst / (kB * kT);
  }
  EXPECT_LE(std::abs(bf16_.loss - fp32.loss), bound + 1e-6 * fp32.loss)
      << "loss " << bf16_.loss << " in " << GetParam() << ", " << fp32.loss << " in fp32";
  ASSERT_EQ(bf16_.grads.size(), fp32.grads.size());
  ASSERT_EQ(fp32.grads.size(), 2U + 2U * 12U + 2U);
  for (const auto& [name, g] : fp32.grads) {
    expect_close_norm(bf16_.grads.at(name), g, kBf16StepTol, "gradient of " + name);
  }
}

TEST_P(Bf16Step, DiffersFromFp32ByBf16Rounding) {
  const Step& fp32 = *fp32_;
  EXPECT_NE(bf16_.loss, fp32.loss) << "the loss is fp32's bit for bit";
  EXPECT_FALSE(bit_equal(bf16_.logits, fp32.logits)) << "the logits are fp32's bit for bit";
  double worst = 0;
  for (const auto& [name, g] : fp32.grads) {
    EXPECT_FALSE(bit_equal(bf16_.grads.at(name), g))
        << "the gradient of " << name << " is fp32's bit for bit";
    worst = std::max(worst, relative_error(bf16_.grads.at(name), g));
  }
  EXPECT_GE(worst, kBf16StepMinError)
      << "the gradients are closer to fp32 than bf16 operands allow: were they rounded?";
}

INSTANTIATE_TEST_SUITE_P(Precisions, Bf16Step, ::testing::Values("bf16-emulated", "bf16"),
                         testing::precision_test_name);

}  // namespace
}  // namespace chimera::model
