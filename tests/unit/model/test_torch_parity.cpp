// The C++ model against the PyTorch reference (tests/fixtures/make_gpt2_fixture.py): logits and
// loss to 1e-5, every gradient to 1e-4 (elementwise), parameters after three AdamW steps with
// clipping to 1e-5 (relative 2-norm of each tensor).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/optim/adamw.hpp"
#include "chimera/optim/clip.hpp"
#include "chimera/optim/lr_schedule.hpp"
#include "fixture_file.hpp"
#include "tolerance.hpp"

namespace chimera::model {
namespace {

using testing::FixtureFile;

class TorchParity : public ::testing::Test {
 protected:
  TorchParity() : file_(std::string(CHIMERA_SOURCE_DIR) + "/tests/fixtures/gpt2_parity.h5") {
    ModelConfig m;
    m.n_layer = static_cast<int>(file_.attribute("n_layer"));
    m.n_embd = static_cast<int>(file_.attribute("n_embd"));
    m.n_head = static_cast<int>(file_.attribute("n_head"));
    m.n_ctx = static_cast<int>(file_.attribute("n_ctx"));
    m.vocab_size = static_cast<int>(file_.attribute("vocab_size"));
    config_ = GPT2Config::from(m);
    B_ = static_cast<int>(file_.attribute("batch_size"));
    T_ = static_cast<int>(file_.attribute("seq_len"));
    idx_ = file_.ints("idx");
    targets_ = file_.ints("targets");
  }

  std::unique_ptr<GPT2Worker> make_worker(const std::vector<int>& partition) {
    auto worker = std::make_unique<GPT2Worker>(
        *backend_, config_,
        explicit_partition(config_, static_cast<int>(partition.size()), partition),
        std::vector<int>(1, 0), GPT2Worker::Options{B_, T_, false});
    for (const TensorInfo* t : worker->tensors()) {
      worker->write_tensor(*t, worker->params_of(*t), file_.floats("weights/" + t->name));
    }
    return worker;
  }

  std::span<const std::int32_t> batch(const std::vector<std::int32_t>& all, int step) const {
    const auto n = static_cast<std::size_t>(B_ * T_);
    return std::span<const std::int32_t>(all).subspan(static_cast<std::size_t>(step) * n, n);
  }

  std::unique_ptr<backend::Backend> backend_ = backend::make_backend(BackendKind::Cpu);
  FixtureFile file_;
  GPT2Config config_;
  int B_ = 0, T_ = 0;
  std::vector<std::int32_t> idx_, targets_;
};

TEST_F(TorchParity, LogitsAndLoss) {
  auto worker = make_worker({config_.n_layer});
  const float loss =
      worker->forward(0, 0, {batch(idx_, 0), nullptr, batch(targets_, 0), 1.0F}, nullptr);
  std::vector<float> logits(static_cast<std::size_t>(B_ * T_ * config_.vocab_size));
  worker->logits(0, logits);
  expect_close(logits, file_.floats("logits"), 1e-5, "logits");
  const double expected = file_.doubles("loss")[0];
  EXPECT_LE(std::abs(loss - expected), 1e-5 * std::abs(expected)) << loss << " vs " << expected;
}

TEST_F(TorchParity, EveryGradient) {
  auto worker = make_worker({config_.n_layer});
  worker->forward(0, 0, {batch(idx_, 0), nullptr, batch(targets_, 0), 1.0F}, nullptr);
  worker->backward(0, 0, nullptr, nullptr);
  worker->finalize_tied_grads();
  for (const TensorInfo* t : worker->tensors()) {
    std::vector<float> grad(t->numel);
    worker->read_tensor(*t, worker->grads_of(*t), grad);
    expect_close(grad, file_.floats("grads/" + t->name), 1e-4, t->name);
  }
}

TEST_F(TorchParity, ThreeAdamWStepsWithClipping) {
  auto worker = make_worker({config_.n_layer});
  TrainConfig train;
  train.lr = file_.attribute("lr");
  train.min_lr = file_.attribute("min_lr");
  train.warmup_steps = static_cast<int>(file_.attribute("warmup_steps"));
  train.steps = static_cast<int>(file_.attribute("total_steps"));
  train.beta1 = file_.attribute("beta1");
  train.beta2 = file_.attribute("beta2");
  train.eps = file_.attribute("eps");
  train.weight_decay = file_.attribute("weight_decay");
  const auto adamw = optim::AdamWConfig::from(train);
  const auto schedule = optim::LrSchedule::from(train);
  const double max_norm = file_.attribute("grad_clip");

  std::vector<optim::ParamRange> stage_ranges, tied_ranges;
  for (const TensorInfo* t : worker->tensors()) {
    (t->stage == kTiedStage ? tied_ranges : stage_ranges)
        .push_back({t->offset, t->numel, t->weight_decay});
  }
  optim::AdamWMoments stage_moments(*backend_, worker->params(0).count);
  optim::AdamWMoments tied_moments(*backend_, worker->tied_params().count);
  const auto norms = file_.doubles("grad_norms");
  const auto lrs = file_.doubles("lrs");
  for (int step = 0; step < 3; ++step) {
    worker->zero_grad();
    worker->forward(0, 0, {batch(idx_, step), nullptr, batch(targets_, step), 1.0F}, nullptr);
    worker->backward(0, 0, nullptr, nullptr);
    worker->finalize_tied_grads();
    const double norm = std::sqrt(
        optim::sum_of_squares(*backend_, worker->grads(0).data, worker->grads(0).count) +
        optim::sum_of_squares(*backend_, worker->tied_grads().data, worker->tied_grads().count));
    EXPECT_NEAR(norm, norms[static_cast<std::size_t>(step)], 1e-4 * norms[0]) << "step " << step;
    EXPECT_NEAR(schedule.at(step), lrs[static_cast<std::size_t>(step)], 1e-15);
    const double scale = optim::clip_scale(norm, max_norm);
    optim::adamw_step(*backend_, adamw, step + 1, schedule.at(step), scale, worker->params(0).data,
                      worker->grads(0).data, stage_moments, stage_ranges);
    optim::adamw_step(*backend_, adamw, step + 1, schedule.at(step), scale,
                      worker->tied_params().data, worker->tied_grads().data, tied_moments,
                      tied_ranges);
  }
  // AdamW divides each gradient element by its own running magnitude, so an element whose
  // gradient is tiny or changes sign between steps passes that gradient's float32 rounding on to
  // its update undiminished: elementwise, float32 PyTorch misses 1e-5 on this fixture too (by
  // 9e-5; docs/model.md). The tensor's relative error as a whole measures the accuracy.
  const double lr_sum = lrs[0] + lrs[1] + lrs[2];
  const auto C = static_cast<std::size_t>(config_.n_embd);
  for (const TensorInfo* t : worker->tensors()) {
    std::vector<float> value(t->numel);
    worker->read_tensor(*t, worker->params_of(*t), value);
    std::vector<float> expected = file_.floats("step3/" + t->name);
    if (t->name.ends_with("attn.c_attn.bias")) {
      // The key bias [C, 2C) has an exactly zero gradient (it adds q_t . b_k to every score of
      // row t, and softmax ignores a constant per row), so in float32 its gradient is rounding
      // noise that AdamW normalises to steps of up to lr: bound it by the LR sum, and compare
      // the query and value biases.
      for (std::size_t i = C; i < 2 * C; ++i) {
        EXPECT_LE(std::abs(value[i] - expected[i]), lr_sum) << t->name << "[" << i << "]";
      }
      value.erase(value.begin() + static_cast<std::ptrdiff_t>(C),
                  value.begin() + static_cast<std::ptrdiff_t>(2 * C));
      expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(C),
                     expected.begin() + static_cast<std::ptrdiff_t>(2 * C));
    }
    expect_close_norm(value, expected, 1e-5, t->name);
  }
}

}  // namespace
}  // namespace chimera::model
