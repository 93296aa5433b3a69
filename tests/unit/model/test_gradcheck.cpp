// Finite-difference checks of every layer's backward: for a loss L = sum_i w_i out_i with fixed
// random w, central differences (L(x + h) - L(x - h)) / 2h at sampled elements of each input
// must match the analytic gradient that the backward computes with dout = w.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/model/activations.hpp"
#include "chimera/model/block.hpp"
#include "chimera/model/layers.hpp"
#include "chimera/model/parameters.hpp"
#include "random_values.hpp"

namespace chimera::model {
namespace {

using Vec = std::vector<float>;

using testing::random_vec;

double weighted_sum(const Vec& out, const Vec& w) {
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

// Central differences of `loss` with respect to `x` at `samples` random elements (and always the
// first and last) against `analytic`: |fd - g| <= 1e-2 (|g| + rms(g)).
void check_gradient(const std::string& what, Vec& x, const Vec& analytic,
                    const std::function<double()>& loss, float h = 1e-2F, int samples = 24) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  double sq = 0;
  for (const float g : analytic) sq += static_cast<double>(g) * g;
  const double rms = std::sqrt(sq / static_cast<double>(analytic.size()));
  ASSERT_GT(rms, 0.0) << what << ": the analytic gradient is all zero";
  std::mt19937 rng(99);
  std::vector<std::size_t> picks{0, x.size() - 1};
  for (int i = 0; i < samples; ++i) picks.push_back(rng() % x.size());
  for (const std::size_t i : picks) {
    const float saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    const double fd = (plus - minus) / (2.0 * h);
    EXPECT_LE(std::abs(fd - analytic[i]), 1e-2 * (std::abs(analytic[i]) + rms))
        << what << "[" << i << "]: finite difference " << fd << ", backward " << analytic[i];
  }
}

class GradCheck : public ::testing::Test {
 protected:
  std::unique_ptr<backend::Backend> be_ = backend::make_backend(BackendKind::Cpu);
  Dims d_{2, 5, 16, 2, 23, 128};  // B, T, C, H, V, Vp
};

TEST_F(GradCheck, Linear) {
  const Index N = d_.N(), n_in = 12, n_out = 20;
  Vec inp = random_vec(N * n_in, 1, 1.0F), weight = random_vec(n_in * n_out, 2, 0.3F);
  Vec bias = random_vec(n_out, 3, 0.3F), residual = random_vec(N * n_out, 4, 1.0F);
  const Vec w = random_vec(N * n_out, 5, 1.0F);
  const auto loss = [&] {
    Vec out(N * n_out);
    linear_forward(*be_, out.data(), inp.data(), weight.data(), bias.data(), residual.data(), N,
                   n_in, n_out);
    return weighted_sum(out, w);
  };
  Vec dinp(inp.size()), dweight(weight.size(), 0.0F), dbias(bias.size(), 0.0F);
  linear_backward_input(*be_, dinp.data(), w.data(), weight.data(), N, n_in, n_out);
  linear_backward_weight(*be_, dweight.data(), dbias.data(), w.data(), inp.data(), N, n_in, n_out);
  check_gradient("linear dinp", inp, dinp, loss);
  check_gradient("linear dweight", weight, dweight, loss);
  check_gradient("linear dbias", bias, dbias, loss);
  check_gradient("linear dresidual", residual, w, loss);
}

TEST_F(GradCheck, CausalAttention) {
  const Index N = d_.N(), C = d_.C;
  Vec qkv = random_vec(N * 3 * C, 10, 1.0F);
  const Vec w = random_vec(N * C, 11, 1.0F);
  Vec att(d_.B * d_.H * d_.T * d_.T), out(N * C);
  const auto loss = [&] {
    be_->attention_forward(out.data(), att.data(), qkv.data(), d_.B, d_.T, d_.C, d_.H);
    return weighted_sum(out, w);
  };
  loss();
  Vec dqkv(qkv.size()), scratch(att.size());
  be_->attention_backward(dqkv.data(), scratch.data(), w.data(), qkv.data(), att.data(), d_.B, d_.T,
                          d_.C, d_.H);
  check_gradient("attention dqkv", qkv, dqkv, loss);
  // Causality: the output at t = 0 depends on no later position.
  const Vec before = out;
  qkv[(d_.T - 1) * 3 * C + 2 * C] += 1.0F;  // value of the last token of sequence 0
  loss();
  for (Index i = 0; i < C; ++i) EXPECT_EQ(out[i], before[i]);
}

TEST_F(GradCheck, LayerNorm) {
  const Index N = d_.N(), C = d_.C;
  Vec x = random_vec(N * C, 20, 1.5F, 0.5F), weight = random_vec(C, 21, 0.3F, 1.0F);
  Vec bias = random_vec(C, 22, 0.3F);
  const Vec w = random_vec(N * C, 23, 1.0F);
  Vec out(N * C), mean(N), rstd(N);
  const auto loss = [&] {
    be_->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(),
                           bias.data(), N, C);
    return weighted_sum(out, w);
  };
  loss();
  Vec dx(x.size()), dweight(C, 0.0F), dbias(C, 0.0F);
  be_->layernorm_backward_input(dx.data(), nullptr, w.data(), x.data(), weight.data(), mean.data(),
                                rstd.data(), N, C);
  be_->layernorm_backward_params(dweight.data(), dbias.data(), w.data(), x.data(), mean.data(),
                                 rstd.data(), N, C);
  check_gradient("layernorm dx", x, dx, loss, 1e-3F);
  check_gradient("layernorm dweight", weight, dweight, loss);
  check_gradient("layernorm dbias", bias, dbias, loss);
}

TEST_F(GradCheck, Gelu) {
  Vec x = random_vec(200, 30, 2.0F);
  const Vec w = random_vec(200, 31, 1.0F);
  const auto loss = [&] {
    Vec out(200);
    be_->gelu_forward(out.data(), x.data(), 200);
    return weighted_sum(out, w);
  };
  Vec dx(200);
  be_->gelu_backward(dx.data(), x.data(), w.data(), 200);
  check_gradient("gelu dx", x, dx, loss, 1e-3F);
}

TEST_F(GradCheck, Embedding) {
  const Index C = d_.C;
  Vec wte = random_vec(d_.V * C, 40, 1.0F), wpe = random_vec(d_.T * C, 41, 1.0F);
  const std::vector<std::int32_t> tokens{3, 7, 3, 22, 0, 3, 3, 1, 9, 22};  // repeats
  const Vec w = random_vec(d_.N() * C, 42, 1.0F);
  const auto loss = [&] {
    Vec out(d_.N() * C);
    be_->embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), d_.B, d_.T, C);
    return weighted_sum(out, w);
  };
  Vec dwte(wte.size(), 0.0F), dwpe(wpe.size(), 0.0F);
  be_->embedding_backward(dwte.data(), dwpe.data(), w.data(), tokens.data(), d_.B, d_.T, C);
  check_gradient("embedding dwpe", wpe, dwpe, loss);
  // Rows of tokens that occur: sample those (the others have zero gradient).
  for (const std::int32_t tok : {3, 22, 0}) {
    for (Index i = 0; i < C; i += 5) {
      const auto at = static_cast<std::size_t>(tok * C + i);
      const float saved = wte[at];
      wte[at] = saved + 1e-2F;
      const double plus = loss();
      wte[at] = saved - 1e-2F;
      const double minus = loss();
      wte[at] = saved;
      EXPECT_NEAR((plus - minus) / 2e-2, dwte[at], 1e-2 * (std::abs(dwte[at]) + 1.0));
    }
  }
}

TEST_F(GradCheck, HeadWithCrossEntropy) {
  const Index N = d_.N(), C = d_.C;
  Vec x = random_vec(N * C, 50, 1.0F), wte = random_vec(d_.Vp * C, 51, 0.3F);
  Vec ln_w = random_vec(C, 52, 0.2F, 1.0F), ln_b = random_vec(C, 53, 0.2F);
  const std::vector<std::int32_t> targets{0, 22, 5, 5, 17, 1, 2, 3, 4, 21};
  // Chunks of 4 rows: the N = 10 rows take three chunks, the last one short.
  constexpr Index kChunk = 4;
  Vec ln_f(N * C), mean(N), rstd(N), dln_f(N * C), losses(N), logits(kChunk * d_.Vp);
  const HeadScratch s{ln_f.data(),   mean.data(),   rstd.data(), dln_f.data(),
                      losses.data(), logits.data(), kChunk};
  Vec dx(x.size()), dwte(wte.size(), 0.0F), dln_w(C, 0.0F), dln_b(C, 0.0F);
  const HeadWeightGrads none{nullptr, nullptr, nullptr};
  const auto loss = [&] {
    head_forward(*be_, d_, {wte.data(), ln_w.data(), ln_b.data()}, x.data(), targets.data(), s,
                 0.0F, none, nullptr);
    double sum = 0;
    for (const float l : losses) sum += l;
    return sum;
  };
  head_forward(*be_, d_, {wte.data(), ln_w.data(), ln_b.data()}, x.data(), targets.data(), s, 1.0F,
               {dwte.data(), dln_w.data(), dln_b.data()}, dx.data());
  const Vec losses_with_gradient = losses;
  loss();
  EXPECT_EQ(losses_with_gradient, losses);  // the gradient does not change the loss
  // The padded rows of wte get no gradient.
  for (std::size_t i = static_cast<std::size_t>(d_.V * C); i < dwte.size(); ++i) {
    ASSERT_EQ(dwte[i], 0.0F);
  }
  dwte.resize(static_cast<std::size_t>(d_.V * C));
  Vec wte_used(wte.begin(), wte.begin() + d_.V * C);
  const auto loss_of_used = [&] {
    std::copy(wte_used.begin(), wte_used.end(), wte.begin());
    return loss();
  };
  check_gradient("head dx", x, dx, loss, 1e-3F);
  check_gradient("head dwte", wte_used, dwte, loss_of_used);
  check_gradient("head dln_f.weight", ln_w, dln_w, loss);
  check_gradient("head dln_f.bias", ln_b, dln_b, loss);
}

TEST_F(GradCheck, TransformerBlock) {
  const Index N = d_.N(), C = d_.C;
  const GPT2Config config = [] {
    ModelConfig m;
    m.n_layer = 1;
    m.n_embd = 16;
    m.n_head = 2;
    m.n_ctx = 5;
    m.vocab_size = 23;
    return GPT2Config::from(m);
  }();
  const ParameterLayout layout(config, StagePartition({1}));
  Vec params(layout.stage_floats(0));
  for (const TensorInfo& t : layout.stage_tensors(0)) {
    const Vec v = random_vec(
        t.numel, static_cast<std::uint32_t>(t.offset + 1), t.shape.size() == 2 ? 0.2F : 0.1F,
        t.name.ends_with("ln_1.weight") || t.name.ends_with("ln_2.weight") ? 1.0F : 0.0F);
    std::copy(v.begin(), v.end(), params.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  Vec x = random_vec(N * C, 60, 1.0F);
  const Vec w = random_vec(N * C, 61, 1.0F);
  std::vector<Vec> store;
  for (const Index n : {N * C, N, N, 3 * N * C, d_.B * d_.H * d_.T * d_.T, N * C, N * C, N * C, N,
                        N, 4 * N * C, 4 * N * C, N * C}) {
    store.emplace_back(static_cast<std::size_t>(n));
  }
  const BlockActivations a{store[0].data(), store[1].data(), store[2].data(),  store[3].data(),
                           store[4].data(), store[5].data(), store[6].data(),  store[7].data(),
                           store[8].data(), store[9].data(), store[10].data(), store[11].data(),
                           store[12].data()};
  const auto loss = [&] {
    block_forward(*be_, d_, layout.block<const float>(params.data(), 0), x.data(), a);
    return weighted_sum(store[12], w);
  };
  loss();
  Vec dx(N * C), dfc(4 * N * C), dln_2(N * C), dx2(N * C), dqkv(3 * N * C), dln_1(N * C);
  Vec datty(N * C), datt(store[4].size()), grads(params.size(), 0.0F);
  const BlockSavedGrads g{dfc.data(), dln_2.data(), dx2.data(), dqkv.data(), dln_1.data()};
  block_backward_input(*be_, d_, layout.block<const float>(params.data(), 0), x.data(), a, w.data(),
                       dx.data(), g, {datty.data(), datt.data()});
  block_backward_weight(*be_, d_, layout.block<float>(grads.data(), 0), x.data(), a, w.data(), g);
  check_gradient("block dx", x, dx, loss, 1e-3F);
  for (const TensorInfo& t : layout.stage_tensors(0)) {
    if (!t.name.starts_with("h.")) continue;  // wpe and ln_f are not part of the block
    Vec p(params.begin() + static_cast<std::ptrdiff_t>(t.offset),
          params.begin() + static_cast<std::ptrdiff_t>(t.offset + t.numel));
    const Vec analytic(grads.begin() + static_cast<std::ptrdiff_t>(t.offset),
                       grads.begin() + static_cast<std::ptrdiff_t>(t.offset + t.numel));
    const auto loss_of_p = [&] {
      std::copy(p.begin(), p.end(), params.begin() + static_cast<std::ptrdiff_t>(t.offset));
      return loss();
    };
    check_gradient("block " + t.name, p, analytic, loss_of_p, 1e-3F, 8);
    loss_of_p();  // restore
  }
}

}  // namespace
}  // namespace chimera::model

namespace chimera::model {
namespace {

// The head in chunks of rows against one chunk of all N rows (the unchunked computation: the
// same GEMMs and softmax calls on the whole [N, V] logits). Losses and dx are per row; wte's
// gradient sums the chunks' shares in another order, within float rounding.
TEST(FusedHead, ChunksEqualOneChunkOfAllRows) {
  const auto be = backend::make_backend(BackendKind::Cpu);
  const Dims d{3, 40, 32, 2, 300, 384};
  const Index N = d.N(), C = d.C;
  const Vec x = random_vec(N * C, 60, 1.0F), wte = random_vec(d.Vp * C, 61, 0.3F);
  const Vec ln_w = random_vec(C, 62, 0.2F, 1.0F), ln_b = random_vec(C, 63, 0.2F);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(N));
  for (Index r = 0; r < N; ++r) targets[static_cast<std::size_t>(r)] = (r * 37) % d.V;
  struct Out {
    Vec losses, dx, dwte, dln_w, dln_b;
  };
  const auto run = [&](Index chunk) {
    Vec ln_f(N * C), mean(N), rstd(N), dln_f(N * C), logits(chunk * d.Vp);
    Out o{Vec(N), Vec(N * C), Vec(wte.size(), 0.0F), Vec(C, 0.0F), Vec(C, 0.0F)};
    const HeadScratch s{ln_f.data(),     mean.data(),   rstd.data(), dln_f.data(),
                        o.losses.data(), logits.data(), chunk};
    head_forward(*be, d, {wte.data(), ln_w.data(), ln_b.data()}, x.data(), targets.data(), s,
                 0.5F / static_cast<float>(N), {o.dwte.data(), o.dln_w.data(), o.dln_b.data()},
                 o.dx.data());
    return o;
  };
  const Out whole = run(N);
  const auto near = [](const Vec& a, const Vec& b, const char* what) {
    double scale = 0;
    for (const float v : b) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-6 * scale) << what << " element " << i;
    }
  };
  for (const Index chunk : {Index{32}, Index{7}, Index{64}}) {
    const Out o = run(chunk);
    near(o.losses, whole.losses, "losses");
    near(o.dx, whole.dx, "dx");
    near(o.dwte, whole.dwte, "dwte");
    near(o.dln_w, whole.dln_w, "dln_f.weight");
    near(o.dln_b, whole.dln_b, "dln_f.bias");
  }
}

TEST(FusedHead, ChunkRowsBoundTheLogits) {
  const Dims small{4, 256, 256, 4, 50257, 50304};
  EXPECT_EQ(head_chunk_rows(small), 256);  // 1024 rows in 4 chunks of 51 MB
  EXPECT_LE(head_chunk_rows(small) * small.Vp, kHeadChunkFloats);
  const Dims gpt2{4, 1024, 768, 12, 50257, 50304};
  EXPECT_LE(head_chunk_rows(gpt2) * gpt2.Vp, kHeadChunkFloats + 32 * gpt2.Vp);
  EXPECT_EQ(head_chunk_rows(gpt2) % 32, 0);
  const Dims tiny{2, 5, 16, 2, 23, 128};
  EXPECT_EQ(head_chunk_rows(tiny), 10);  // all rows fit in one chunk
}

}  // namespace
}  // namespace chimera::model
