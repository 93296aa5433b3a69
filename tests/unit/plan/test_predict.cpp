#include <gtest/gtest.h>

#include "chimera/core/error.hpp"
#include "chimera/plan/predict.hpp"
#include "plan_testing.hpp"

namespace chimera::plan {
namespace {

using testing::emulated;
using testing::small_model;

Layout layout(const std::string& scheme, int W, int D, int N, int B = 1) {
  return {scheme, "", 0, 0, W, D, N, B, false, false};
}

// DESIGN §3 reference facts with unit costs and a free network.
TEST(Predict, ReproducesTheIterationTimesOfDesign) {
  Predictor equal(small_model(), emulated(1, 1));
  const Prediction chimera = equal(layout("chimera", 1, 4, 4));
  EXPECT_DOUBLE_EQ(chimera.iteration_ms, 10.0);  // 2N + D - 2 slots
  EXPECT_DOUBLE_EQ(chimera.work_ms, 8.0);
  EXPECT_DOUBLE_EQ(chimera.bubble_ms, 2.0);
  EXPECT_DOUBLE_EQ(chimera.bubble_ratio, 2.0 / 10.0);
  EXPECT_DOUBLE_EQ(equal(layout("1f1b", 1, 4, 4)).iteration_ms, 14.0);  // 2 (N + D - 1)

  // B = 2F: chimera (N + D/2 - 1)(F + B) + (D/2 - 1) F = 16, 1f1b (N + D - 1)(F + B) = 21.
  Predictor twice(small_model(), emulated(1, 2));
  EXPECT_DOUBLE_EQ(twice(layout("chimera", 1, 4, 4)).iteration_ms, 16.0);
  EXPECT_DOUBLE_EQ(twice(layout("1f1b", 1, 4, 4)).iteration_ms, 21.0);
  const Prediction p = twice(layout("chimera", 3, 4, 4, 5));
  EXPECT_DOUBLE_EQ(p.samples_per_s, 3 * 4 * 5 / 16.0 * 1e3);
}

TEST(Predict, EmulatedCostsAreThroughOneWorkersSliceOfTheModel) {
  // As in the runtime's emulation and the simulator: with v = 2 model stages per worker an op
  // costs F / 2, so a worker's work is N (F + B) whatever v is.
  Predictor predict(small_model(), emulated(1, 1));
  Layout l = layout("interleaved", 1, 4, 4);
  l.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(predict(l).work_ms, 4 * 2.0);
}

TEST(Predict, MessagesAddAlphaToTheCriticalPath) {
  // gpipe D=2 N=1: F | alpha | F B | alpha | B, then the tied table over 2 ranks: 2 log2(2) alpha.
  Predictor predict(small_model(), emulated(1, 1, {0.1, 0.0}));
  const Prediction p = predict(layout("gpipe", 1, 2, 1));
  EXPECT_NEAR(p.p2p_ms, 0.2, 1e-12);
  EXPECT_NEAR(p.allreduce_exposed_ms, 0.2, 1e-12);
  EXPECT_NEAR(p.iteration_ms, 4.4, 1e-12);
}

TEST(Predict, RanksOfOneHostSkipTheLinkBetweenThem) {
  // gpipe D=2 N=1 with both workers on one host: the two messages go through memory (free here),
  // and so does the tied table's sum (one replica, both holders on the host).
  Network net{0.1, 0.0};
  net.ranks_per_host = 2;
  Predictor predict(small_model(), emulated(1, 1, net));
  const Prediction p = predict(layout("gpipe", 1, 2, 1));
  EXPECT_NEAR(p.p2p_ms, 0.0, 1e-12);
  EXPECT_NEAR(p.allreduce_exposed_ms, 0.0, 1e-12);
  EXPECT_NEAR(p.iteration_ms, 4.0, 1e-12);
  // Ranks per host that do not divide D: one line naming the rule.
  net.ranks_per_host = 3;
  Predictor odd(small_model(), emulated(1, 1, net));
  EXPECT_THROW(odd(layout("gpipe", 1, 4, 1)), InputError);
}

TEST(Predict, ExposedAllreduceIsTheLastStageSyncThenTheTiedTable) {
  // gpipe D=2 N=1 W=4, F = B = 1, alpha = 0: F0 [0,1] msg F1 B1 [2+m, 3+m] msg B0 [3+2m, 4+2m].
  // Stage 1's allreduce starts after B1 and overlaps B0; stage 0's starts at the end, and the
  // tied token table (workers 0 and 1, 4 replicas each) follows it.
  const double beta = 1e-6;
  const ModelShape shape = small_model();
  Predictor predict(shape, emulated(1, 1, {0.0, beta}));
  const Prediction p = predict(layout("gpipe", 4, 2, 1));
  const auto stages = shape.stages(2);
  const double message = beta * shape.message_bytes(1);
  const double stage_bytes = 4.0 * std::max(stages[0].params, stages[1].params);
  const double stage_ar = 2.0 * 3 / 4 * beta * stage_bytes;               // 4 replicas
  const double tied_ar = 2.0 * 7 / 8 * beta * 4.0 * shape.tied_params();  // 2 holders x 4
  ASSERT_GT(stage_ar, 1 + message);  // so that stage 1's allreduce outlasts B0
  EXPECT_NEAR(p.p2p_ms, 2 * message, 1e-12);
  EXPECT_NEAR(p.allreduce_exposed_ms, stage_ar + tied_ar, 1e-9);
  EXPECT_NEAR(p.iteration_ms, 4.0 + 2 * message + stage_ar + tied_ar, 1e-9);
  EXPECT_NEAR(p.allreduce_ms, 2 * stage_ar + tied_ar, 1e-9);
  EXPECT_NEAR(p.allreduce_hidden_ms, 1 + message, 1e-9);
}

TEST(Predict, MemoryPerWorker) {
  const ModelShape shape = small_model();
  const auto stages = shape.stages(2);
  Predictor predict(shape, emulated(1, 1));
  Layout l = layout("gpipe", 1, 2, 4, 2);
  const Prediction p = predict(l);
  ASSERT_EQ(p.memory.size(), 2U);
  const double params0 = stages[0].params + shape.tied_params();
  EXPECT_DOUBLE_EQ(p.memory[0].weights, 4 * params0);
  EXPECT_DOUBLE_EQ(p.memory[0].gradients, 4 * params0);
  EXPECT_DOUBLE_EQ(p.memory[0].optimizer, 8 * params0);
  // GPipe holds all N micro-batches before the first backward.
  EXPECT_DOUBLE_EQ(p.memory[0].activations, 4 * shape.activation_bytes(stages[0], 2, false));
  EXPECT_DOUBLE_EQ(p.memory[1].activations, 4 * shape.activation_bytes(stages[1], 2, false));
  // The last stage's worker also holds the head's scratch (one chunk of logits).
  EXPECT_DOUBLE_EQ(p.memory[0].workspace, shape.workspace_bytes(2));
  EXPECT_DOUBLE_EQ(p.memory[1].workspace, shape.workspace_bytes(2) + shape.head_scratch_bytes(2));
  EXPECT_DOUBLE_EQ(p.peak_memory_bytes, std::max(p.memory[0].total(), p.memory[1].total()));

  l.recompute = true;
  const Prediction r = predict(l);
  EXPECT_DOUBLE_EQ(r.memory[1].activations, 4 * shape.activation_bytes(stages[1], 2, true) +
                                                shape.activation_bytes(stages[1], 2, false));
  EXPECT_LT(r.peak_memory_bytes, p.peak_memory_bytes);
  // Recomputation runs the forward again: F + (B + F) per micro-batch on every stage.
  EXPECT_DOUBLE_EQ(r.work_ms, 4 * 3.0);

  // The split backward keeps gradients from I to W on top of the activations.
  const Prediction zb = predict(layout("zb-h1", 1, 2, 4, 2));
  const Prediction one = predict(layout("1f1b", 1, 2, 4, 2));
  EXPECT_GT(zb.memory[1].activations, one.memory[1].activations);
}

Layout sharded(const std::string& scheme, int W, int D, int N, int B = 1) {
  Layout l = layout(scheme, W, D, N, B);
  l.shard_optimizer = true;
  return l;
}

TEST(Predict, ShardedMomentsAreOneShareOfEachHeldStagesHolders) {
  const ModelShape shape = small_model();
  Machine m = emulated(1, 1);
  m.compute.optimizer_ns_per_param = 1e3;
  Predictor predict(shape, m);
  const double tied = shape.tied_params();
  {
    // Chimera D = 4, W = 2: worker 0 holds stages 0 and 3, and the tied table; each has 2
    // holders (workers 0 and 3) x W = 4 replicas, so the worker keeps a quarter of its moments.
    const auto st = shape.stages(4);
    const Prediction full = predict(layout("chimera", 2, 4, 4));
    const Prediction p = predict(sharded("chimera", 2, 4, 4));
    const double held0 = tied + st[0].params + st[3].params;
    EXPECT_DOUBLE_EQ(full.memory[0].optimizer, 8 * held0);
    EXPECT_DOUBLE_EQ(p.memory[0].optimizer, 8 * held0 / 4);
    EXPECT_DOUBLE_EQ(p.memory[1].optimizer, 8 * (st[1].params + st[2].params) / 4);
    EXPECT_DOUBLE_EQ(p.memory[0].weights, full.memory[0].weights);  // full weights and gradients
    EXPECT_DOUBLE_EQ(p.memory[0].gradients, full.memory[0].gradients);
    EXPECT_LT(p.peak_memory_bytes, full.peak_memory_bytes);
    // The optimizer step updates only the shard: a quarter of the busiest worker's parameters.
    EXPECT_NEAR(p.optimizer_ms, full.optimizer_ms / 4, 1e-12);
  }
  {
    // 1F1B D = 2, W = 3: a stage has one holder x 3 replicas, the tied table two (both ends) x 3.
    const auto st = shape.stages(2);
    const Prediction p = predict(sharded("1f1b", 3, 2, 4));
    EXPECT_DOUBLE_EQ(p.memory[0].optimizer, 8 * (st[0].params / 3 + tied / 6));
    EXPECT_DOUBLE_EQ(p.memory[1].optimizer, 8 * (st[1].params / 3 + tied / 6));
  }
  // One replica of everything but the tied table: only its moments shrink.
  const auto st = shape.stages(4);
  EXPECT_DOUBLE_EQ(predict(sharded("1f1b", 1, 4, 4)).memory[1].optimizer, 8 * st[1].params);
  EXPECT_DOUBLE_EQ(predict(sharded("1f1b", 1, 4, 4)).memory[0].optimizer,
                   8 * (st[0].params + tied / 2));
}

TEST(Predict, ShardedTimeIsTheUnshardedOneWithAFreeNetworkAndAddsGatherWaitsOtherwise) {
  const ModelShape shape = small_model();
  Predictor free_net(shape, emulated(1, 2));
  const Prediction a = free_net(layout("chimera", 2, 4, 8));
  const Prediction b = free_net(sharded("chimera", 2, 4, 8));
  EXPECT_DOUBLE_EQ(a.iteration_ms, b.iteration_ms);
  EXPECT_DOUBLE_EQ(b.gather_exposed_ms, 0);

  // A slow network: alone, the ring reduce-scatter and the all-gather together cost what the
  // allreduce does but for the ring's latency, r - 1 steps against Rabenseifner's log2 r: five
  // sums (four stages and the tied table) over r = 4 replicas, one alpha (0.01 ms) more each.
  // Here the rings take longer: a worker's two stages and the tied table share its links, and a
  // ring posts its pieces at the holders' block boundaries while they still compute. The first
  // forwards wait for the gathers, and the parts still add up.
  Predictor slow(shape, emulated(1, 2, {0.01, 1e-5}));
  const Prediction full = slow(layout("chimera", 2, 4, 8));
  const Prediction p = slow(sharded("chimera", 2, 4, 8));
  EXPECT_GT(p.allreduce_ms + p.gather_ms, full.allreduce_ms + 5 * 0.01);
  EXPECT_GT(p.gather_exposed_ms, 0);
  EXPECT_DOUBLE_EQ(p.p2p_ms, full.p2p_ms);
  EXPECT_NEAR(p.iteration_ms,
              p.work_ms + p.bubble_ms + p.p2p_ms + p.gather_exposed_ms + p.allreduce_exposed_ms +
                  p.optimizer_ms,
              1e-9);
  EXPECT_DOUBLE_EQ(full.gather_exposed_ms, 0);
  EXPECT_DOUBLE_EQ(full.gather_ms, 0);
}

TEST(Predict, MemoryLimitDecidesFits) {
  const ModelShape shape = small_model();
  Machine m = emulated(1, 1);
  Predictor big(shape, m);
  const double need = big(layout("1f1b", 1, 4, 4)).peak_memory_bytes;
  m.memory_bytes = need + 10;
  m.reserve_bytes = 10;
  EXPECT_TRUE(Predictor(shape, m)(layout("1f1b", 1, 4, 4)).fits);
  m.reserve_bytes = 11;
  EXPECT_FALSE(Predictor(shape, m)(layout("1f1b", 1, 4, 4)).fits);
}

TEST(Predict, LayerCostsSumOverTheStage) {
  ComputeModel c;
  LayerCosts costs;
  costs.micro_batch_size = 1;
  costs.embedding = {1, 10};
  costs.block = {2, 20};
  costs.head = {4, 40};
  c.layers = costs;
  const OpCost middle = c.stage_cost({3, false, false, 0}, 1);
  EXPECT_DOUBLE_EQ(middle.forward_ms, 6);
  const OpCost whole = c.stage_cost({2, true, true, 0}, 2);
  EXPECT_DOUBLE_EQ(whole.forward_ms, 2 * (1 + 4 + 4));
  EXPECT_DOUBLE_EQ(whole.backward_ms, 2 * (10 + 40 + 40));
  c.layers->stage_overhead_ms = 0.5;  // once per stage op, whatever its layers
  EXPECT_DOUBLE_EQ(c.stage_cost({3, false, false, 0}, 1).forward_ms, 6.5);
  EXPECT_DOUBLE_EQ(c.stage_cost({2, true, true, 0}, 2).backward_ms, 2 * (10 + 40 + 40) + 0.5);
}

Machine head_heavy_machine() {
  // The head costs as much as 4 blocks; the embedding is free.
  Machine m = emulated(0, 0);
  LayerCosts costs;
  costs.n_embd = 64;
  costs.n_head = 4;
  costs.seq_len = 32;
  costs.vocab_size = 1000;
  costs.micro_batch_size = 1;
  costs.block = {1, 2};
  costs.head = {4, 8};
  m.compute.layers = costs;
  return m;
}

TEST(Predict, OneStagePerWorkerRunsAtTheSlowestStage) {
  const ModelShape shape = small_model();
  const auto stages = shape.stages(4);
  const double last = stages[3].blocks + 4.0;  // the slowest stage, forward
  Predictor predict(shape, head_heavy_machine());
  const Prediction p = predict(layout("gpipe", 1, 4, 4));
  EXPECT_DOUBLE_EQ(p.work_ms, 4 * (last + 2 * last));
  EXPECT_DOUBLE_EQ(p.iteration_ms, (4 + 3) * 3 * last);
}

TEST(Predict, ChimeraWorkersRunAtTheMeanOfTheirTwoStages) {
  const ModelShape shape = small_model();
  const auto stages = shape.stages(4);
  std::vector<double> forward;
  for (const StageInfo& st : stages) forward.push_back(st.blocks + (st.last ? 4.0 : 0.0));
  // Worker p holds stages p and 3 - p; the busiest pair sets the op cost.
  const double x = std::max(forward[0] + forward[3], forward[1] + forward[2]) / 2;
  Predictor predict(shape, head_heavy_machine());
  const Prediction p = predict(layout("chimera", 1, 4, 4));
  EXPECT_DOUBLE_EQ(p.work_ms, 4 * x + 4 * 2 * x);
  // B = 2F: (N + D/2 - 1)(F + B) + (D/2 - 1) F
  EXPECT_DOUBLE_EQ(p.iteration_ms, 16 * x);
}

TEST(Predict, InvalidLayoutsAreInputErrors) {
  Predictor predict(small_model(), emulated(1, 2));
  Layout halving = layout("chimera", 1, 4, 4, 3);
  halving.variant = "halving";
  EXPECT_THROW(predict(halving), InputError);  // odd B cannot be halved
  halving.B = 2;
  EXPECT_GT(predict(halving).iteration_ms, 0);
  EXPECT_THROW(predict(layout("chimera", 1, 3, 4)), InputError);  // odd D
  EXPECT_THROW(predict(layout("gpipe", 1, 16, 4)), InputError);   // more stages than blocks
  EXPECT_THROW(predict(layout("gpipe", 0, 2, 4)), InputError);
}

TEST(Predict, CostsMustBeForThisModel) {
  Machine m = emulated(1, 1);
  LayerCosts costs;
  costs.n_embd = 64;
  costs.n_head = 4;
  costs.seq_len = 64;  // the model trains on 32
  costs.vocab_size = 1000;
  m.compute.layers = costs;
  EXPECT_THROW(Predictor(small_model(), m), InputError);
}

}  // namespace
}  // namespace chimera::plan
