// The CPU backend's two fp32 GEMM engines (BLIS, oneDNN), each forced in turn: both against a
// double-precision reference, and both bit-identical for any thread count, also where oneDNN's
// sums over a long k follow the shape of the call (which its slabs must therefore not change).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_backend.hpp"
#include "onednn_matmul.hpp"
#include "random_values.hpp"

namespace chimera::backend::cpu {
namespace {

using Vec = std::vector<float>;

using testing::random_vec;

struct Shape {
  Trans ta, tb;
  Index m, n, k;
  Index lda() const { return ta == Trans::Yes ? m : k; }
  Index ldb() const { return tb == Trans::Yes ? k : n; }
};

class Fp32GemmEngines : public ::testing::TestWithParam<Fp32GemmEngine> {
 protected:
  void SetUp() override {
    saved_ = fp32_gemm_engine();
    use_fp32_gemm_engine(GetParam());
  }
  void TearDown() override { use_fp32_gemm_engine(saved_); }

 private:
  Fp32GemmEngine saved_ = Fp32GemmEngine::Blis;
};

// C = alpha op(A) op(B) + beta C for beta 0 and 1 (the betas oneDNN takes), against sums in double.
TEST_P(Fp32GemmEngines, MatchTheReferenceInEveryLayout) {
  for (const Trans ta : {Trans::No, Trans::Yes}) {
    for (const Trans tb : {Trans::No, Trans::Yes}) {
      for (const float beta : {0.0F, 1.0F}) {
        const Shape s{ta, tb, 70, 45, 300};
        const Vec a = random_vec(static_cast<std::size_t>(s.m * s.k), 1);
        const Vec b = random_vec(static_cast<std::size_t>(s.k * s.n), 2);
        Vec c = random_vec(static_cast<std::size_t>(s.m * s.n), 3);
        std::vector<double> expected(c.size());
        for (Index i = 0; i < s.m; ++i) {
          for (Index j = 0; j < s.n; ++j) {
            double sum = 0;
            for (Index p = 0; p < s.k; ++p) {
              const double x = ta == Trans::Yes ? a[p * s.lda() + i] : a[i * s.lda() + p];
              const double y = tb == Trans::Yes ? b[j * s.ldb() + p] : b[p * s.ldb() + j];
              sum += x * y;
            }
            expected[i * s.n + j] = 0.5 * sum + beta * c[i * s.n + j];
          }
        }
        gemm_fp32(ta, tb, s.m, s.n, s.k, 0.5F, a.data(), s.lda(), b.data(), s.ldb(), beta, c.data(),
                  s.n);
        for (std::size_t i = 0; i < c.size(); ++i) {
          // fp32 sums of 300 unit-variance products: a few ulps of sqrt(300).
          ASSERT_NEAR(c[i], expected[i], 1e-4 * std::sqrt(300.0))
              << "element " << i << ", beta " << beta;
        }
      }
    }
  }
}

// Shapes with a long k, split into row and column slabs, run with 1, 2 and 3 threads.
TEST_P(Fp32GemmEngines, BitIdenticalForAnyThreadCount) {
  const std::vector<Shape> shapes = {
      {Trans::No, Trans::No, 1024, 96, 2000},  {Trans::No, Trans::Yes, 96, 1500, 1200},
      {Trans::Yes, Trans::No, 1300, 64, 1024}, {Trans::Yes, Trans::Yes, 80, 900, 1100},
      {Trans::No, Trans::Yes, 512, 3000, 64},
  };
  const int saved = omp_get_max_threads();
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const Shape& sh = shapes[s];
    const Vec a = random_vec(static_cast<std::size_t>(sh.m * sh.k), 10 + s);
    const Vec b = random_vec(static_cast<std::size_t>(sh.k * sh.n), 20 + s);
    const Vec c0 = random_vec(static_cast<std::size_t>(sh.m * sh.n), 30 + s);
    std::vector<Vec> results;
    for (const int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Vec c = c0;
      gemm_fp32(sh.ta, sh.tb, sh.m, sh.n, sh.k, 0.25F, a.data(), sh.lda(), b.data(), sh.ldb(), 1.0F,
                c.data(), sh.n);
      results.push_back(std::move(c));
    }
    omp_set_num_threads(saved);
    for (std::size_t t = 1; t < results.size(); ++t) {
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[t].data(), results[0].size() * 4))
          << "shape " << s << ": " << t + 1 << " threads differ from 1";
    }
  }
}

std::string engine_name(const ::testing::TestParamInfo<Fp32GemmEngine>& info) {
  return info.param == Fp32GemmEngine::Onednn ? "onednn" : "blis";
}

INSTANTIATE_TEST_SUITE_P(Engines, Fp32GemmEngines,
                         ::testing::Values(Fp32GemmEngine::Blis, Fp32GemmEngine::Onednn),
                         engine_name);

// The backend says which engine its fp32 GEMMs run on.
TEST(Fp32GemmEngine, DescriptionNamesTheEngine) {
  const Fp32GemmEngine saved = fp32_gemm_engine();
  use_fp32_gemm_engine(Fp32GemmEngine::Onednn);
  EXPECT_EQ(fp32_gemm_description().rfind("oneDNN ", 0), 0U) << fp32_gemm_description();
  use_fp32_gemm_engine(Fp32GemmEngine::Blis);
  EXPECT_EQ(fp32_gemm_description().rfind("BLIS ", 0), 0U) << fp32_gemm_description();
  use_fp32_gemm_engine(saved);
}

}  // namespace
}  // namespace chimera::backend::cpu
