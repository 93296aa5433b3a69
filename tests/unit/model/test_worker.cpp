// The worker's memory accounting (against the closed forms of activations.hpp), its buffers, and
// its errors for bad input and misuse.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "chimera/backend/buffer.hpp"
#include "chimera/core/error.hpp"
#include "chimera/model/worker.hpp"

namespace chimera::model {
namespace {

class Worker : public ::testing::Test {
 protected:
  Worker() {
    ModelConfig m;
    m.n_layer = 3;
    m.n_embd = 32;
    m.n_head = 4;
    m.n_ctx = 10;
    m.vocab_size = 50;
    config_ = GPT2Config::from(m);
    ids_.resize(kB * kT);
    for (std::size_t i = 0; i < ids_.size(); ++i) ids_[i] = static_cast<std::int32_t>(i % 50);
  }

  static constexpr int kB = 3, kT = 8;
  std::unique_ptr<backend::Backend> be_ = backend::make_backend(BackendKind::Cpu);
  GPT2Config config_;
  std::vector<std::int32_t> ids_;
};

TEST_F(Worker, ActivationBytesMatchTheClosedFormAndFollowInFlightMicroBatches) {
  for (const bool recompute : {false, true}) {
    const StagePartition p({2, 1});
    GPT2Worker first(*be_, config_, p, {0}, {kB, kT, recompute});
    GPT2Worker last(*be_, config_, p, {1}, {kB, kT, recompute});
    first.init_parameters(1);
    last.init_parameters(1);
    const Dims& d = first.dims();
    const Index N = d.N(), C = d.C, BHTT = d.B * d.H * d.T * d.T;
    // The documented formulas, written out: activations.hpp.
    const auto full = [&](Index n, Index f, Index l) {
      return static_cast<std::size_t>(
          4 * (N * C * (1 + l) + n * (16 * N * C + 4 * N + BHTT) + N * (f + l)));
    };
    // The last stage keeps the gradient of its input from its forward, and no logits.
    const auto kept = [&](Index f, Index l) {
      return static_cast<std::size_t>(4 * (N * C * (1 + l) + N * (f + l)));
    };
    const std::size_t first_mb = recompute ? kept(1, 0) : full(2, 1, 0);
    const std::size_t last_mb = recompute ? kept(0, 1) : full(1, 0, 1);
    EXPECT_EQ(activation_bytes_formula(d, {2, true, false}, recompute), first_mb);
    EXPECT_EQ(activation_bytes_formula(d, {1, false, true}, recompute), last_mb);

    backend::DeviceBuffer act(*be_, first.message_floats() * sizeof(float) * 3);
    backend::DeviceBuffer grad(*be_, first.message_floats() * sizeof(float));
    for (int mb = 0; mb < 3; ++mb) {
      first.forward(0, mb, {ids_, nullptr, {}}, act.f32() + mb * first.message_floats());
      EXPECT_EQ(first.activation_bytes(), (mb + 1) * first_mb);
      last.forward(1, mb, {{}, act.f32() + mb * first.message_floats(), ids_, 1.0F}, nullptr);
      EXPECT_EQ(last.activation_bytes(), (mb + 1) * last_mb);
    }
    // With recompute, a forward holds the full record until it has kept the input.
    EXPECT_EQ(first.peak_activation_bytes(), 3 * first_mb + (recompute ? full(2, 1, 0) : 0));
    // Split backward: the slot holds every activation plus the saved gradients,
    // 4 N C (11 n + first) bytes, until the weight pass.
    last.backward_input(1, 0, nullptr, grad.f32());
    const auto saved_last = static_cast<std::size_t>(4 * N * C * (11 * 1));
    EXPECT_EQ(last.activation_bytes(), full(1, 0, 1) + saved_last + 2 * last_mb);
    last.backward_weight(1, 0);
    EXPECT_EQ(last.activation_bytes(), 2 * last_mb);
    first.backward(0, 0, grad.f32(), nullptr);
    EXPECT_EQ(first.activation_bytes(), 2 * first_mb);
    for (int mb = 1; mb < 3; ++mb) {
      last.backward(1, mb, nullptr, grad.f32());
      first.backward(0, mb, grad.f32(), nullptr);
    }
    EXPECT_EQ(first.activation_bytes(), 0U);
    EXPECT_EQ(last.activation_bytes(), 0U);
    EXPECT_EQ(last.peak_activation_bytes(), recompute
                                                ? 3 * last_mb + full(1, 0, 1) - last_mb + saved_last
                                                : 3 * last_mb + saved_last);
    EXPECT_EQ(first.workspace_bytes(), static_cast<std::size_t>(4 * (13 * N * C + BHTT)));
    // The last stage's worker also holds the head's scratch: one chunk of logits (here all N
    // rows fit in one), ln_f and its gradient, mean, rstd and the losses.
    EXPECT_EQ(last.workspace_bytes(), static_cast<std::size_t>(4 * (13 * N * C + BHTT) +
                                                               4 * (2 * N * C + 3 * N + N * d.Vp)));
    first.reset_peak_activation_bytes();
    EXPECT_EQ(first.peak_activation_bytes(), 0U);
  }
}

TEST_F(Worker, BuffersAndTiedStages) {
  const StagePartition p({1, 1, 1});
  GPT2Worker ends(*be_, config_, p, {0, 2}, {kB, kT, false});
  GPT2Worker middle(*be_, config_, p, {1}, {kB, kT, false});
  EXPECT_TRUE(ends.holds_tied());
  EXPECT_FALSE(middle.holds_tied());
  EXPECT_EQ(middle.tied_params().count, 0U);
  EXPECT_EQ(ends.tied_params().count, static_cast<std::size_t>(128 * 32));
  EXPECT_EQ(ends.params(2).count, ends.layout().stage_floats(2));
  EXPECT_THROW(middle.params(0), Error);
  EXPECT_EQ(GPT2Worker::tied_stages(3), (std::vector<int>{0, 2}));
  EXPECT_EQ(GPT2Worker::tied_stages(1), (std::vector<int>{0}));
  EXPECT_EQ(ends.message_floats(), static_cast<std::size_t>(kB * kT * 32));
  EXPECT_EQ(ends.tensors().size(), 1U + (1 + 12) + (12 + 2));
}

TEST_F(Worker, FinalizeTiedGradsAddsTheEmbeddingPartOnce) {
  GPT2Worker w(*be_, config_, StagePartition({3}), {0}, {kB, kT, false});
  w.init_parameters(3);
  w.forward(0, 0, {ids_, nullptr, ids_, 1.0F}, nullptr);
  w.backward(0, 0, nullptr, nullptr);
  EXPECT_TRUE(w.tied_grads_pending());
  const auto count = w.tied_grads().count;
  std::vector<float> head(count), once(count), twice(count);
  be_->copy_to_host(head.data(), w.tied_grads().data, count * sizeof(float));
  w.finalize_tied_grads();
  EXPECT_FALSE(w.tied_grads_pending());
  be_->copy_to_host(once.data(), w.tied_grads().data, count * sizeof(float));
  w.finalize_tied_grads();
  be_->copy_to_host(twice.data(), w.tied_grads().data, count * sizeof(float));
  EXPECT_NE(head, once);   // the embedding's part was added...
  EXPECT_EQ(once, twice);  // ...once
}

TEST_F(Worker, TheHookRunsAfterEveryBlockOfEachPass) {
  // The runtime progresses MPI there: a 3-block stage calls it 3 times per forward, backward,
  // input and weight backward, and 3 more where recomputation reruns the forward.
  for (const bool recompute : {false, true}) {
    GPT2Worker w(*be_, config_, StagePartition({3}), {0}, {kB, kT, recompute});
    w.init_parameters(5);
    int calls = 0;
    w.set_after_block([&calls] { ++calls; });
    w.forward(0, 0, {ids_, nullptr, ids_, 1.0F}, nullptr);
    EXPECT_EQ(calls, 3);
    w.backward(0, 0, nullptr, nullptr);
    EXPECT_EQ(calls, recompute ? 9 : 6);
    w.forward(0, 1, {ids_, nullptr, ids_, 1.0F}, nullptr);
    calls = 0;
    w.backward_input(0, 1, nullptr, nullptr);
    w.backward_weight(0, 1);
    EXPECT_EQ(calls, recompute ? 9 : 6);
    w.set_after_block({});
    w.forward(0, 2, {ids_, nullptr, ids_, 1.0F}, nullptr);
    EXPECT_EQ(calls, recompute ? 9 : 6);
    w.release(0, 2);
  }
}

TEST_F(Worker, TokensOutsideTheVocabularyAreInputErrors) {
  GPT2Worker w(*be_, config_, StagePartition({3}), {0}, {kB, kT, false});
  auto bad = ids_;
  bad[5] = 50;
  try {
    w.forward(0, 0, {bad, nullptr, ids_}, nullptr);
    FAIL() << "no error for token 50 with vocab_size 50";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("token 50 at position 5"), std::string::npos) << e.what();
  }
  bad[5] = -1;
  EXPECT_THROW(w.forward(0, 1, {ids_, nullptr, bad}, nullptr), InputError);
  EXPECT_EQ(w.activation_bytes(), 0U);
}

TEST_F(Worker, OptionsAreChecked) {
  EXPECT_THROW(GPT2Worker(*be_, config_, StagePartition({3}), {0}, {kB, 11, false}), InputError);
  // The micro-batch size is the run plan's (B / mb_split, checked at setup): a contract here.
  EXPECT_THROW(GPT2Worker(*be_, config_, StagePartition({3}), {0}, {0, kT, false}), Error);
  EXPECT_THROW(GPT2Worker(*be_, config_, StagePartition({2, 1}), {2}, {kB, kT, false}), Error);
  EXPECT_THROW(GPT2Worker(*be_, config_, StagePartition({2, 1}), {1, 1}, {kB, kT, false}), Error);
}

TEST_F(Worker, MisuseIsAnErrorNotACrash) {
  GPT2Worker w(*be_, config_, StagePartition({2, 1}), {0, 1}, {kB, kT, false});
  backend::DeviceBuffer act(*be_, w.message_floats() * sizeof(float));
  EXPECT_THROW(w.backward(0, 0, act.f32(), nullptr), Error);  // no forward
  w.forward(0, 0, {ids_, nullptr, {}}, act.f32());
  EXPECT_THROW(w.forward(0, 0, {ids_, nullptr, {}}, act.f32()), Error);  // twice
  EXPECT_THROW(w.backward_weight(0, 0), Error);                          // before input pass
  EXPECT_THROW(w.backward(0, 0, nullptr, nullptr), Error);               // needs grad_output
  EXPECT_THROW(w.forward(1, 0, {{}, nullptr, ids_}, nullptr), Error);    // needs an activation
  w.release(0, 0);
  EXPECT_EQ(w.activation_bytes(), 0U);
  // A last-stage forward without the loss gradient (evaluation) has no backward.
  GPT2Worker whole(*be_, config_, StagePartition({3}), {0}, {kB, kT, false});
  whole.forward(0, 0, {ids_, nullptr, ids_}, nullptr);
  EXPECT_THROW(whole.backward(0, 0, nullptr, nullptr), Error);
  EXPECT_THROW(whole.backward_input(0, 0, nullptr, nullptr), Error);
  whole.release(0, 0);
}

TEST_F(Worker, LogitsOfTheLastStage) {
  GPT2Worker w(*be_, config_, StagePartition({3}), {0}, {kB, kT, false});
  w.init_parameters(9);
  const float loss = w.forward(0, 0, {ids_, nullptr, ids_, 1.0F}, nullptr);
  std::vector<float> logits(static_cast<std::size_t>(kB * kT * 50));
  w.logits(0, logits);
  // The mean cross-entropy from these logits is the loss the forward returned.
  double sum = 0;
  for (int r = 0; r < kB * kT; ++r) {
    const float* row = logits.data() + r * 50;
    double mx = row[0], z = 0;
    for (int i = 0; i < 50; ++i) mx = std::max(mx, static_cast<double>(row[i]));
    for (int i = 0; i < 50; ++i) z += std::exp(row[i] - mx);
    sum += std::log(z) + mx - row[ids_[static_cast<std::size_t>(r)]];
  }
  EXPECT_NEAR(loss, sum / (kB * kT), 1e-5);
  w.backward(0, 0, nullptr, nullptr);
  GPT2Worker r(*be_, config_, StagePartition({3}), {0}, {kB, kT, true});
  r.forward(0, 0, {ids_, nullptr, ids_}, nullptr);
  EXPECT_THROW(r.logits(0, logits), Error);  // recompute keeps no logits
}

}  // namespace
}  // namespace chimera::model
