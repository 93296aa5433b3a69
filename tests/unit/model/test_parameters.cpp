// Parameter names, shapes and buffer layout, and the partition-independent initialisation.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/model/init.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/model/worker.hpp"

namespace chimera::model {
namespace {

GPT2Config tiny_config(int n_layer) {
  ModelConfig m;
  m.n_layer = n_layer;
  m.n_embd = 32;
  m.n_head = 2;
  m.n_ctx = 20;
  m.vocab_size = 97;
  return GPT2Config::from(m);
}

TEST(ParameterLayout, HuggingFaceNamesShapesAndOrder) {
  const GPT2Config c = tiny_config(2);
  const ParameterLayout layout(c, StagePartition({2}));
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const TensorInfo* t : layout.all()) {
    names.push_back(t->name);
    shapes[t->name] = t->shape;
  }
  const std::vector<std::string> block = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  std::vector<std::string> expected = {"wte.weight", "wpe.weight"};
  for (int b = 0; b < 2; ++b) {
    for (const auto& s : block) expected.push_back("h." + std::to_string(b) + "." + s);
  }
  expected.insert(expected.end(), {"ln_f.weight", "ln_f.bias"});
  EXPECT_EQ(names, expected);
  using S = std::vector<std::int64_t>;
  EXPECT_EQ(shapes["wte.weight"], (S{97, 32}));
  EXPECT_EQ(shapes["wpe.weight"], (S{20, 32}));
  EXPECT_EQ(shapes["h.1.attn.c_attn.weight"], (S{32, 96}));
  EXPECT_EQ(shapes["h.1.attn.c_attn.bias"], (S{96}));
  EXPECT_EQ(shapes["h.0.mlp.c_fc.weight"], (S{32, 128}));
  EXPECT_EQ(shapes["h.0.mlp.c_proj.weight"], (S{128, 32}));
  EXPECT_EQ(shapes["ln_f.bias"], (S{32}));
  EXPECT_EQ(layout.tied_floats(), 128U * 32U);  // padded rows
  EXPECT_EQ(layout.find("nope"), nullptr);
  EXPECT_EQ(layout.find("h.1.ln_2.bias")->shape, (S{32}));
}

TEST(ParameterLayout, DecayOnlyForTwoDimensionalTensors) {
  const ParameterLayout layout(tiny_config(1), StagePartition({1}));
  for (const TensorInfo* t : layout.all()) {
    EXPECT_EQ(t->weight_decay, t->shape.size() == 2) << t->name;
  }
  EXPECT_TRUE(layout.tied().weight_decay);
  EXPECT_TRUE(layout.find("wpe.weight")->weight_decay);
}

TEST(ParameterLayout, EveryTensorOnExactlyOneStageAlignedAndInside) {
  const GPT2Config c = tiny_config(5);
  const ParameterLayout whole(c, StagePartition({5}));
  const ParameterLayout split(c, StagePartition({2, 1, 2}));
  std::set<std::string> names;
  for (int s = 0; s < 3; ++s) {
    std::size_t end = 0;
    for (const TensorInfo& t : split.stage_tensors(s)) {
      EXPECT_TRUE(names.insert(t.name).second) << t.name << " on two stages";
      EXPECT_EQ(t.stage, s);
      EXPECT_EQ(t.offset % ParameterLayout::kAlignFloats, 0U) << t.name;
      EXPECT_GE(t.offset, end) << t.name << " overlaps the tensor before it";
      end = t.offset + t.numel;
      EXPECT_EQ(t.shape, whole.find(t.name)->shape);
    }
    EXPECT_LE(end, split.stage_floats(s));
  }
  EXPECT_EQ(names.size() + 1, whole.all().size());  // + wte
  EXPECT_NE(split.find("wpe.weight"), nullptr);
  EXPECT_EQ(split.find("wpe.weight")->stage, 0);
  EXPECT_EQ(split.find("ln_f.weight")->stage, 2);
  EXPECT_EQ(split.find("h.2.ln_1.weight")->stage, 1);
  EXPECT_EQ(split.tied().stage, kTiedStage);
}

TEST(Init, ValueDependsOnSeedNameAndIndexOnly) {
  EXPECT_EQ(standard_normal_at(1, "h.0.mlp.c_fc.weight", 17),
            standard_normal_at(1, "h.0.mlp.c_fc.weight", 17));
  EXPECT_NE(standard_normal_at(1, "h.0.mlp.c_fc.weight", 17),
            standard_normal_at(2, "h.0.mlp.c_fc.weight", 17));
  EXPECT_NE(standard_normal_at(1, "h.0.mlp.c_fc.weight", 17),
            standard_normal_at(1, "h.1.mlp.c_fc.weight", 17));
  EXPECT_NE(standard_normal_at(1, "h.0.mlp.c_fc.weight", 17),
            standard_normal_at(1, "h.0.mlp.c_fc.weight", 18));
}

TEST(Init, DistributionsOfGPT2) {
  const GPT2Config c = tiny_config(3);
  const ParameterLayout layout(c, StagePartition({3}));
  const auto stats = [&](const char* name) {
    const TensorInfo& t = *layout.find(name);
    std::vector<float> v(t.numel);
    initial_values(t, 42, v);
    double sum = 0, sq = 0;
    for (const float x : v) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(v.size());
    return std::pair{mean, std::sqrt(sq / static_cast<double>(v.size()) - mean * mean)};
  };
  const auto [wte_mean, wte_std] = stats("wte.weight");
  EXPECT_NEAR(wte_mean, 0.0, 0.001);
  EXPECT_NEAR(wte_std, 0.02, 0.0005);
  const auto [fc_mean, fc_std] = stats("h.1.mlp.c_fc.weight");
  EXPECT_NEAR(fc_std, 0.02, 0.0005);
  const auto [proj_mean, proj_std] = stats("h.2.mlp.c_proj.weight");
  EXPECT_NEAR(proj_std, 0.02 / std::sqrt(6.0), 0.0003);
  EXPECT_NEAR(stats("h.0.attn.c_proj.weight").second, 0.02 / std::sqrt(6.0), 0.0005);
  EXPECT_EQ(stats("h.0.ln_1.weight"), (std::pair{1.0, 0.0}));
  EXPECT_EQ(stats("h.0.attn.c_attn.bias"), (std::pair{0.0, 0.0}));
  EXPECT_EQ(stats("ln_f.bias"), (std::pair{0.0, 0.0}));
}

TEST(Init, IdenticalWeightsForEveryPartition) {
  auto be = backend::make_backend(BackendKind::Cpu);
  const GPT2Config c = tiny_config(4);
  const GPT2Worker::Options options{1, 8, false};
  GPT2Worker whole(*be, c, StagePartition({4}), {0}, options);
  GPT2Worker front(*be, c, StagePartition({1, 2, 1}), {0, 2}, options);
  GPT2Worker middle(*be, c, StagePartition({1, 2, 1}), {1}, options);
  for (GPT2Worker* w : {&whole, &front, &middle}) w->init_parameters(1337);
  std::size_t compared = 0;
  for (GPT2Worker* part : {&front, &middle}) {
    for (const TensorInfo* t : part->tensors()) {
      std::vector<float> a(t->numel), b(t->numel);
      part->read_tensor(*t, part->params_of(*t), a);
      const TensorInfo& same = *whole.layout().find(t->name);
      whole.read_tensor(same, whole.params_of(same), b);
      EXPECT_EQ(a, b) << t->name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, whole.tensors().size());
  // The padding rows of wte stay zero.
  std::vector<float> tied(whole.tied_params().count);
  be->copy_to_host(tied.data(), whole.tied_params().data, tied.size() * sizeof(float));
  for (std::size_t i = 97 * 32; i < tied.size(); ++i) ASSERT_EQ(tied[i], 0.0F);
}

}  // namespace
}  // namespace chimera::model
