// The CPU backend's bf16 GEMMs (runtime.precision = bf16, bf16-emulated): the rounding, the
// emulation's exact meaning, the error bound of rounding analysis (bf16_gemm_bound.hpp), thread
// independence, the weight copies, the oneDNN plumbing, and what is refused on a CPU without
// bf16 units. Tests of real bf16 skip, saying why, on such a CPU.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "bf16_gemm_bound.hpp"
#include "chimera/backend/backend.hpp"
#include "chimera/core/error.hpp"
#include "cpu_backend.hpp"
#include "cpu_precision.hpp"
#include "onednn_matmul.hpp"
#include "random_values.hpp"

namespace chimera::backend::cpu {
namespace {

using Vec = std::vector<float>;

using testing::random_vec;

std::unique_ptr<Backend> cpu_backend(const std::string& precision) {
  BackendOptions options;
  options.precision = precision;
  return make_backend(BackendKind::Cpu, options);
}

// While alive, runtime.precision = bf16 runs on `engine` ("onednn", "fp32"; nullptr: the probe's
// choice), through CHIMERA_CPU_BF16_GEMM; the variable's earlier value comes back at the end.
class Bf16EngineSetting {
 public:
  explicit Bf16EngineSetting(const char* engine) {
    const char* now = std::getenv(kName);
    had_ = now != nullptr;
    if (had_) saved_ = now;
    if (engine != nullptr) {
      setenv(kName, engine, 1);
    } else {
      unsetenv(kName);
    }
  }
  ~Bf16EngineSetting() {
    if (had_) {
      setenv(kName, saved_.c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  Bf16EngineSetting(const Bf16EngineSetting&) = delete;
  Bf16EngineSetting& operator=(const Bf16EngineSetting&) = delete;

 private:
  static constexpr const char* kName = "CHIMERA_CPU_BF16_GEMM";
  bool had_ = false;
  std::string saved_;
};

// Both engines of runtime.precision = bf16.
constexpr const char* kBf16Engines[] = {"onednn", "fp32"};

// One GEMM problem with strides, alpha and beta, in one of the four transpose combinations.
struct Problem {
  Trans ta, tb;
  int m = 37, n = 29, k = 300;
  float alpha = 0.5F, beta = 1.0F;
  int lda, ldb, ldc;
  Vec a, b, c;

  Problem(Trans trans_a, Trans trans_b, std::uint32_t seed) : ta(trans_a), tb(trans_b) {
    lda = (ta == Trans::Yes ? m : k) + 3;
    ldb = (tb == Trans::Yes ? k : n) + 5;
    ldc = n + 2;
    a = random_vec(static_cast<std::size_t>((ta == Trans::Yes ? k : m) * lda), seed);
    b = random_vec(static_cast<std::size_t>((tb == Trans::Yes ? n : k) * ldb), seed + 1);
    c = random_vec(static_cast<std::size_t>(m * ldc), seed + 2);
  }
  float at_a(int i, int p) const { return ta == Trans::Yes ? a[p * lda + i] : a[i * lda + p]; }
  float at_b(int p, int j) const { return tb == Trans::Yes ? b[j * ldb + p] : b[p * ldb + j]; }
  Vec run(Backend& be) const {
    Vec out = c;
    be.gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
    return out;
  }
};

Vec rounded(const Vec& v) {
  Vec out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_to_bf16(v[i]);
  return out;
}

std::vector<std::pair<Trans, Trans>> all_transposes() {
  return {{Trans::No, Trans::No},
          {Trans::No, Trans::Yes},
          {Trans::Yes, Trans::No},
          {Trans::Yes, Trans::Yes}};
}

TEST(Bf16Rounding, NearestEvenLikeTheHardware) {
  const float one = 1.0F, ulp = std::ldexp(1.0F, -7);  // bf16 spacing above 1
  EXPECT_EQ(round_to_bf16(one), one);
  EXPECT_EQ(round_to_bf16(one + ulp / 2), one);                   // tie: to the even 1.0
  EXPECT_EQ(round_to_bf16(one + 3 * ulp / 2), one + 2 * ulp);     // tie: to the even 1 + 2 ulp
  EXPECT_EQ(round_to_bf16(one + ulp / 2 + ulp / 64), one + ulp);  // above the tie: up
  EXPECT_EQ(round_to_bf16(-(one + ulp / 2 + ulp / 64)), -(one + ulp));
  EXPECT_EQ(round_to_bf16(one + ulp / 2 - ulp / 64), one);  // below the tie: down
  EXPECT_EQ(to_bf16_bits(1.0F), 0x3F80);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(round_to_bf16(-0.0F)), 0x80000000U);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(round_to_bf16(inf), inf);
  EXPECT_EQ(round_to_bf16(-inf), -inf);
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()), inf);  // beyond bf16's largest
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A signalling NaN whose payload lies in the low half must not become infinity.
  EXPECT_TRUE(std::isnan(round_to_bf16(std::bit_cast<float>(0x7F800001U))));
  const float tiny = std::numeric_limits<float>::denorm_min() * 3;
  EXPECT_EQ(round_to_bf16(tiny), 0.0F);  // far below bf16's smallest subnormal step: to zero
}

// The emulation is, by definition, the fp32 GEMM of the rounded operands: bit for bit.
TEST(Bf16Gemm, EmulationIsTheFp32GemmOfRoundedOperands) {
  auto emulated = cpu_backend("bf16-emulated");
  auto fp32 = cpu_backend("fp32");
  for (const auto& [ta, tb] : all_transposes()) {
    Problem p(ta, tb, 11);
    const Vec got = p.run(*emulated);
    Problem r = p;
    r.a = rounded(p.a);
    r.b = rounded(p.b);
    EXPECT_EQ(got, r.run(*fp32)) << "transposes " << static_cast<int>(ta) << static_cast<int>(tb);
  }
}

// Both bf16 paths against exact (double) products: within the rounding bound everywhere, and
// not the fp32 result (a path that silently ran in fp32 fails here).
class Bf16GemmPaths : public ::testing::TestWithParam<std::string> {};

void expect_within_the_rounding_bound(const std::string& precision);

TEST_P(Bf16GemmPaths, WithinTheRoundingBoundAndNotFp32) {
  CHIMERA_SKIP_UNLESS_CPU_RUNS(GetParam());
  if (GetParam() != "bf16") {
    expect_within_the_rounding_bound(GetParam());
    return;
  }
  for (const char* engine : kBf16Engines) {  // bf16 on each of its engines
    const Bf16EngineSetting setting(engine);
    expect_within_the_rounding_bound("bf16");
  }
}

void expect_within_the_rounding_bound(const std::string& precision) {
  auto be = cpu_backend(precision);
  auto fp32 = cpu_backend("fp32");
  SCOPED_TRACE(be->description());
  for (const auto& [ta, tb] : all_transposes()) {
    const Problem p(ta, tb, 21);
    const Vec got = p.run(*be);
    double worst = 0;
    for (int i = 0; i < p.m; ++i) {
      for (int j = 0; j < p.n; ++j) {
        double exact = 0, magnitudes = 0;
        for (int q = 0; q < p.k; ++q) {
          exact += static_cast<double>(p.at_a(i, q)) * p.at_b(q, j);
          magnitudes += std::abs(static_cast<double>(p.at_a(i, q)) * p.at_b(q, j));
        }
        const double c_in = p.c[static_cast<std::size_t>(i * p.ldc + j)];
        exact = p.alpha * exact + p.beta * c_in;
        const double bound = testing::bf16_gemm_bound(p.alpha, magnitudes, p.beta, c_in, p.k);
        const double err = std::abs(got[static_cast<std::size_t>(i * p.ldc + j)] - exact);
        ASSERT_LE(err, bound) << precision << " C[" << i << "," << j << "]";
        worst = std::max(worst, err / bound);
      }
    }
    EXPECT_GT(worst, 1e-3) << "errors far below bf16 rounding: were the operands rounded?";
    EXPECT_NE(got, p.run(*fp32)) << precision << " GEMM is bit-equal to fp32";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, Bf16GemmPaths, ::testing::Values("bf16-emulated", "bf16"),
                         testing::precision_test_name);

// Like fp32, the emulation gives the same bits for any thread count, in every GEMM the model
// runs: the team GEMM, batched GEMMs and the attention heads.
TEST(Bf16Gemm, EmulationIsThreadIndependent) {
  auto be = cpu_backend("bf16-emulated");
  const int B = 2, T = 64, C = 48, H = 3;
  const Vec qkv = random_vec(static_cast<std::size_t>(B * T * 3 * C), 31);
  const Vec dout = random_vec(static_cast<std::size_t>(B * T * C), 32);
  const Vec big_a = random_vec(300 * 200, 33), big_b = random_vec(200 * 250, 34);
  const auto run = [&] {
    Vec c(300 * 250), out(static_cast<std::size_t>(B * T * C)),
        att(static_cast<std::size_t>(B * H * T * T)), datt(att.size()), dqkv(qkv.size());
    be->gemm(Trans::No, Trans::No, 300, 250, 200, 1.0F, big_a.data(), 200, big_b.data(), 250, 0.0F,
             c.data(), 250);
    be->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    be->attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                           H);
    return std::vector<Vec>{c, out, att, dqkv};
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run();
  omp_set_num_threads(2);
  const auto two = run();
  omp_set_num_threads(saved);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "output " << i;
  // And the attention GEMMs are bf16 too: not the fp32 result.
  auto fp32 = cpu_backend("fp32");
  Vec out(static_cast<std::size_t>(B * T * C)), att(static_cast<std::size_t>(B * H * T * T));
  fp32->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
  EXPECT_NE(one[2], att) << "attention scores were computed from fp32 operands";
}

// oneDNN's bf16 kernels are deterministic for a given thread count: repeating the model's GEMMs
// (the team GEMM, the attention heads run one per thread) gives the same bits, at 1 and 2
// threads. (Between thread counts they may differ: oneDNN may split the sums by thread.)
TEST(Bf16Gemm, OnednnRepeatsItsBitsAtEachThreadCount) {
  CHIMERA_SKIP_UNLESS_CPU_RUNS(std::string("bf16"));
  const Bf16EngineSetting onednn("onednn");
  auto be = cpu_backend("bf16");
  const int B = 2, T = 64, C = 48, H = 3;
  const Vec qkv = random_vec(static_cast<std::size_t>(B * T * 3 * C), 41);
  const Vec big_a = random_vec(700 * 300, 43), big_b = random_vec(300 * 500, 44);
  const auto run = [&] {
    Vec c(700 * 500), out(static_cast<std::size_t>(B * T * C)),
        att(static_cast<std::size_t>(B * H * T * T));
    be->gemm(Trans::No, Trans::Yes, 700, 500, 300, 1.0F, big_a.data(), 300, big_b.data(), 300, 0.0F,
             c.data(), 500);
    be->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    return std::vector<Vec>{c, out, att};
  };
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const auto first = run();
    const auto again = run();
    for (std::size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(first[i], again[i]) << "output " << i << " at " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

// The fused bf16 head (each gradient row rounded once, for both GEMMs) gives the bits of the
// default, which rounds the chunk for each GEMM; with registered weights as in the model. On
// each engine of bf16 (bf16 bits on oneDNN, rounded floats on the fp32 units) and in
// bf16-emulated.
class FusedBf16Head : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedBf16Head, GivesTheDefaultsBits) {
  const bool emulated = GetParam() == "emulated";
  if (!emulated) CHIMERA_SKIP_UNLESS_CPU_RUNS(std::string("bf16"));
  const Bf16EngineSetting setting(emulated ? nullptr : GetParam().c_str());
  CpuBackend be(emulated ? CpuPrecision::Bf16Emulated : CpuPrecision::Bf16);
  EXPECT_EQ(be.gemm_engine(), GetParam() == "onednn" ? "oneDNN" : "fp32 units");
  const Index N = 70, C = 48, V = 300, ld = 384, chunk = 32;
  const Vec x = random_vec(static_cast<std::size_t>(N * C), 51);
  Vec wte = random_vec(static_cast<std::size_t>(ld * C), 52, 0.3F);
  be.register_weights(wte.data(), static_cast<Index>(wte.size()));
  std::vector<std::int32_t> targets(static_cast<std::size_t>(N));
  for (Index r = 0; r < N; ++r) targets[static_cast<std::size_t>(r)] = (r * 7) % V;
  const auto run = [&](bool fused) {
    Vec losses(static_cast<std::size_t>(N)), dx(static_cast<std::size_t>(N * C)),
        dwte(wte.size(), 0.5F), logits(static_cast<std::size_t>(chunk * ld));
    for (int pass = 0; pass < 2; ++pass) {  // accumulates into dwte
      if (fused) {
        be.lm_head_cross_entropy(losses.data(), dx.data(), dwte.data(), x.data(), wte.data(),
                                 targets.data(), N, C, V, 0.25F, logits.data(), ld, chunk);
      } else {
        be.Backend::lm_head_cross_entropy(losses.data(), dx.data(), dwte.data(), x.data(),
                                          wte.data(), targets.data(), N, C, V, 0.25F, logits.data(),
                                          ld, chunk);
      }
    }
    return std::vector<Vec>{losses, dx, dwte};
  };
  const auto fused = run(true), reference = run(false);
  EXPECT_EQ(fused[0], reference[0]) << "losses";
  EXPECT_EQ(fused[1], reference[1]) << "dx";
  EXPECT_EQ(fused[2], reference[2]) << "dwte";
  EXPECT_NE(fused[2], Vec(wte.size(), 0.5F));
}

INSTANTIATE_TEST_SUITE_P(Engines, FusedBf16Head, ::testing::Values("onednn", "fp32", "emulated"));

// runtime.precision = bf16 runs on the engine CHIMERA_CPU_BF16_GEMM names, else on the one the
// probe found faster, and says which and why. On the fp32 units its bits are bf16-emulated's.
TEST(Bf16Precision, EngineIsChosenAndNamed) {
  CHIMERA_SKIP_UNLESS_CPU_RUNS(std::string("bf16"));
  {
    const Bf16EngineSetting probe(nullptr);
    auto be = cpu_backend("bf16");
    const std::string why = be->description();
    EXPECT_TRUE(why.find("faster here than") != std::string::npos ||
                why.find("AMX") != std::string::npos)
        << why;
    EXPECT_TRUE(be->gemm_engine() == "oneDNN" || be->gemm_engine() == "fp32 units") << why;
  }
  {
    const Bf16EngineSetting onednn("onednn");
    EXPECT_EQ(cpu_backend("bf16")->gemm_engine(), "oneDNN");
  }
  const Bf16EngineSetting fp32("fp32");
  auto be = cpu_backend("bf16");
  EXPECT_EQ(be->gemm_engine(), "fp32 units");
  EXPECT_EQ(be->gemm_precision(), "bf16");
  EXPECT_NE(be->description().find("CHIMERA_CPU_BF16_GEMM=fp32"), std::string::npos)
      << be->description();
  auto emulated = cpu_backend("bf16-emulated");
  for (const auto& [ta, tb] : all_transposes()) {
    const Problem p(ta, tb, 61);
    EXPECT_EQ(p.run(*be), p.run(*emulated));
  }
  const Bf16EngineSetting unknown("amx");
  try {
    cpu_backend("bf16");
    ADD_FAILURE() << "an unknown CHIMERA_CPU_BF16_GEMM was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("onednn or fp32"), std::string::npos) << message;
  }
}

// Registered weights are converted once, and again after every backend call that writes them.
TEST(Bf16Gemm, WeightCopiesAreRemadeAfterEveryWrite) {
  CpuBackend be(CpuPrecision::Bf16Emulated);
  CpuBackend unregistered(CpuPrecision::Bf16Emulated);
  const int m = 64, n = 48, k = 32;
  float* w = static_cast<float*>(be.allocate(k * n * sizeof(float)));
  const Vec w0 = random_vec(static_cast<std::size_t>(k * n), 41);
  be.copy_from_host(w, w0.data(), w0.size() * sizeof(float));
  be.register_weights(w, k * n);
  const Vec x = random_vec(static_cast<std::size_t>(m * k), 42);
  const auto product = [&](Backend& backend, const float* weights) {
    Vec y(static_cast<std::size_t>(m * n));
    backend.gemm(Trans::No, Trans::No, m, n, k, 1.0F, x.data(), k, weights, n, 0.0F, y.data(), n);
    return y;
  };
  const auto expect_current = [&](const char* after) {
    Vec host(static_cast<std::size_t>(k * n));
    be.copy_to_host(host.data(), w, host.size() * sizeof(float));
    EXPECT_EQ(product(be, w), product(unregistered, host.data())) << "after " << after;
  };
  expect_current("registration");
  EXPECT_EQ(be.weight_conversions(), 1U);
  expect_current("a second GEMM");
  EXPECT_EQ(be.weight_conversions(), 1U) << "unchanged weights were converted again";

  const Vec w1 = random_vec(w0.size(), 43);
  be.copy_from_host(w + 5, w1.data(), 7 * sizeof(float));
  expect_current("copy_from_host");
  Vec grads = random_vec(w0.size(), 44), m1(w0.size(), 0.0F), v1(w0.size(), 0.0F);
  AdamWArgs args;
  args.step_size = 0.1F;
  be.adamw_update(w, grads.data(), m1.data(), v1.data(), k * n, args);
  expect_current("adamw_update");
  be.accumulate(w + n, grads.data(), n);
  expect_current("accumulate");
  be.copy(w, w1.data(), n * sizeof(float));
  expect_current("copy");
  be.fill_zero(w + 2 * n, n * sizeof(float));
  expect_current("fill_zero");
  EXPECT_EQ(be.weight_conversions(), 6U);
  be.deallocate(w);
}

// The oneDNN plumbing (strides, transposes, alpha, beta as a sum post-op, per-thread streams and
// scratchpads) with fp32 operands, which every CPU runs, against BLIS.
class OnednnEpilogues : public ::testing::TestWithParam<Epilogue> {};

TEST_P(OnednnEpilogues, Fp32OperandsAgreeWithBlisInEveryLayout) {
  OnednnMatmul matmul(OperandType::F32, GetParam());
  auto blis = cpu_backend("fp32");
  for (const auto& [ta, tb] : all_transposes()) {
    for (const float beta : {0.0F, 1.0F}) {
      Problem p(ta, tb, 51);
      p.beta = beta;
      const Vec expected = p.run(*blis);
      std::vector<Vec> got(4, p.c);
#pragma omp parallel for num_threads(2)
      for (int t = 0; t < 4; ++t) {
        matmul.run(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a.data(), p.lda, p.b.data(), p.ldb, p.beta,
                   got[static_cast<std::size_t>(t)].data(), p.ldc);
      }
      for (const Vec& g : got) {
        for (std::size_t i = 0; i < g.size(); ++i) {
          ASSERT_NEAR(g[i], expected[i], 1e-4 * (1 + std::abs(expected[i])))
              << "element " << i << " beta " << beta;
        }
      }
    }
  }
  Vec c(4, 7.0F);
  matmul.run(Trans::No, Trans::No, 2, 2, 0, 1.0F, nullptr, 1, nullptr, 2, 0.0F, c.data(), 2);
  EXPECT_EQ(c, Vec(4, 0.0F)) << "an empty sum with beta 0 must clear C";
}

// oneDNN's output scale and sum post-op, and the pass over C that replaces them where a kernel
// does not take them.
INSTANTIATE_TEST_SUITE_P(Epilogues, OnednnEpilogues,
                         ::testing::Values(Epilogue::OneDnnWhereSupported, Epilogue::Ours),
                         [](const auto& param_info) {
                           return param_info.param == Epilogue::Ours ? std::string("Ours")
                                                                     : std::string("OneDnn");
                         });

TEST(Bf16Precision, RefusedInOneLineWhereTheCpuHasNoBf16Units) {
  const auto why = bf16_unsupported();
  if (!why) {
    auto be = cpu_backend("bf16");
    EXPECT_NE(be->description().find("oneDNN"), std::string::npos) << be->description();
    EXPECT_EQ(cpu_backend("auto")->gemm_precision(), "bf16");
    GTEST_SKIP() << "this CPU has bf16 units: nothing is refused (bf16 runs: " << be->description()
                 << ")";
  }
  try {
    cpu_backend("bf16");
    ADD_FAILURE() << "bf16 was accepted on a CPU without bf16 units";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("bf16-emulated"), std::string::npos) << message;
    EXPECT_NE(message.find("AMX"), std::string::npos) << message;
  }
  const auto fallback = cpu_backend("auto")->description();
  EXPECT_NE(fallback.find("fp32 GEMMs on "), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("; auto chose fp32: "), std::string::npos) << fallback;
}

TEST(Bf16Precision, UnknownPrecisionsNameTheChoices) {
  for (const char* bad : {"fp16", "tf32", "BF16"}) {
    try {
      cpu_backend(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bf16-emulated"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace chimera::backend::cpu
