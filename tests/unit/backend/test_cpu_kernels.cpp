// Every CPU kernel against a plain double-precision reference, and bit-identical results for any
// OpenMP thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/core/error.hpp"
#include "random_values.hpp"

namespace chimera::backend {
namespace {

using Vec = std::vector<float>;

using testing::random_vec;

// |a_i - b_i| <= tol * (|b_i| + rms(b)) elementwise: relative, with the array's scale as the floor
// for values that come out of cancellation.
void expect_near_all(const Vec& actual, const std::vector<double>& expected, double tol,
                     const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double sum_sq = 0;
  for (const double e : expected) sum_sq += e * e;
  const double rms = std::sqrt(sum_sq / static_cast<double>(expected.size()));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_LE(std::abs(actual[i] - expected[i]), tol * (std::abs(expected[i]) + rms))
        << what << "[" << i << "] = " << actual[i] << ", expected " << expected[i];
  }
}

// Runs `kernel` with 1 and with 2 OpenMP threads on copies of the same inputs.
template <typename Kernel>
void expect_thread_independent(const Kernel& kernel) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<Vec> one = kernel();
  omp_set_num_threads(2);
  const std::vector<Vec> two = kernel();
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)))
        << "output " << i << " differs between 1 and 2 threads";
  }
}

class CpuKernels : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be_ = make_backend(BackendKind::Cpu);
};

// --- GEMM ------------------------------------------------------------------------------------

std::vector<double> reference_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha,
                                   const Vec& a, int lda, const Vec& b, int ldb, float beta,
                                   const Vec& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double x = ta == Trans::Yes ? a[p * lda + i] : a[i * lda + p];
        const double y = tb == Trans::Yes ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
      }
      out[i * ldc + j] = alpha * sum + (beta == 0.0F ? 0.0 : beta * c[i * ldc + j]);
    }
  }
  return out;
}

TEST_F(CpuKernels, GemmEveryTransposeWithStridesAlphaBeta) {
  const int m = 37, n = 29, k = 41;
  for (const Trans ta : {Trans::No, Trans::Yes}) {
    for (const Trans tb : {Trans::No, Trans::Yes}) {
      const int lda = (ta == Trans::Yes ? m : k) + 3;
      const int ldb = (tb == Trans::Yes ? k : n) + 5;
      const int ldc = n + 2;
      const Vec a = random_vec(static_cast<std::size_t>((ta == Trans::Yes ? k : m) * lda), 1);
      const Vec b = random_vec(static_cast<std::size_t>((tb == Trans::Yes ? n : k) * ldb), 2);
      Vec c = random_vec(static_cast<std::size_t>(m * ldc), 3);
      const auto expected = reference_gemm(ta, tb, m, n, k, 0.5F, a, lda, b, ldb, 2.0F, c, ldc);
      be_->gemm(ta, tb, m, n, k, 0.5F, a.data(), lda, b.data(), ldb, 2.0F, c.data(), ldc);
      expect_near_all(c, expected, 1e-5, "gemm");
    }
  }
}

TEST_F(CpuKernels, GemmBetaZeroIgnoresNaNInOutput) {
  const Vec a = random_vec(16 * 8, 4), b = random_vec(8 * 16, 5);
  Vec c(16 * 16, std::numeric_limits<float>::quiet_NaN());
  be_->gemm(Trans::No, Trans::No, 16, 16, 8, 1.0F, a.data(), 8, b.data(), 16, 0.0F, c.data(), 16);
  for (const float x : c) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(CpuKernels, StridedBatchedGemmMatchesSingleCalls) {
  const int m = 12, n = 9, k = 7, batch = 5;
  const Vec a = random_vec(static_cast<std::size_t>(batch * k * m), 6);
  const Vec b = random_vec(static_cast<std::size_t>(batch * k * n), 7);
  Vec batched(static_cast<std::size_t>(batch * m * n)), single(batched.size());
  be_->gemm_strided_batched(Trans::Yes, Trans::No, m, n, k, 1.5F, a.data(), m, k * m, b.data(), n,
                            k * n, 0.0F, batched.data(), n, m * n, batch);
  for (int i = 0; i < batch; ++i) {
    be_->gemm(Trans::Yes, Trans::No, m, n, k, 1.5F, a.data() + i * k * m, m, b.data() + i * k * n,
              n, 0.0F, single.data() + i * m * n, n);
  }
  EXPECT_EQ(batched, single);
}

TEST_F(CpuKernels, GemmIsThreadIndependent) {
  const Vec a = random_vec(300 * 200, 8), b = random_vec(200 * 250, 9);
  const Vec long_panel = random_vec(50 * 4000, 10);
  expect_thread_independent([&] {
    Vec c(300 * 250);
    be_->gemm(Trans::No, Trans::No, 300, 250, 200, 1.0F, a.data(), 200, b.data(), 250, 0.0F,
              c.data(), 250);
    Vec d(4 * 64 * 64);
    be_->gemm_strided_batched(Trans::No, Trans::Yes, 64, 64, 50, 1.0F, a.data(), 200, 50, b.data(),
                              250, 50, 0.0F, d.data(), 64, 64 * 64, 4);
    // Long enough for more slabs than threads, and wider than tall (column slabs).
    Vec e(4000 * 16), f(16 * 4000);
    be_->gemm(Trans::Yes, Trans::No, 4000, 16, 50, 1.0F, long_panel.data(), 4000, a.data(), 16,
              0.0F, e.data(), 16);
    be_->gemm(Trans::No, Trans::No, 16, 4000, 50, 1.0F, a.data(), 50, long_panel.data(), 4000, 0.0F,
              f.data(), 4000);
    return std::vector<Vec>{c, d, e, f};
  });
}

// --- row kernels -----------------------------------------------------------------------------

TEST_F(CpuKernels, AccumulateBiasAndBiasBackward) {
  const int N = 13, C = 37;
  const Vec bias = random_vec(C, 10), residual = random_vec(N * C, 11);
  Vec out(N * C);
  be_->broadcast_bias(out.data(), residual.data(), bias.data(), N, C);
  for (int i = 0; i < N * C; ++i) ASSERT_EQ(out[i], residual[i] + bias[i % C]);
  be_->broadcast_bias(out.data(), nullptr, bias.data(), N, C);
  for (int i = 0; i < N * C; ++i) ASSERT_EQ(out[i], bias[i % C]);

  Vec dbias = random_vec(C, 12);
  std::vector<double> expected(dbias.begin(), dbias.end());
  for (int r = 0; r < N; ++r) {
    for (int j = 0; j < C; ++j) expected[j] += residual[r * C + j];
  }
  be_->bias_backward(dbias.data(), residual.data(), N, C);
  expect_near_all(dbias, expected, 1e-5, "bias_backward");

  Vec dst = random_vec(100, 13);
  const Vec src = random_vec(100, 14);
  std::vector<double> sum(100);
  for (int i = 0; i < 100; ++i) sum[i] = static_cast<double>(dst[i]) + src[i];
  be_->accumulate(dst.data(), src.data(), 100);
  expect_near_all(dst, sum, 1e-6, "accumulate");
}

// The embedding's wte gradient moves into the head's only where tokens touched it: the listed
// rows are added and cleared, the others left as they are (in both tables).
TEST_F(CpuKernels, MoveRowsAddsAndClearsOnlyTheListedRows) {
  const int rows = 9, C = 21;
  const std::vector<std::int32_t> touched = {7, 2, 5};
  const Vec before = random_vec(rows * C, 15);
  Vec dst = before, src(rows * C, 0.0F);
  const Vec values = random_vec(rows * C, 16);
  for (const int r : touched) {
    for (int j = 0; j < C; ++j) src[r * C + j] = values[r * C + j];
  }
  // A row outside the list that is not zero shows whether it was visited (the caller promises
  // zeros there; the CPU backend relies on it).
  src[0] = 1.0F;
  be_->move_rows(dst.data(), src.data(), rows, C, touched.data(),
                 static_cast<Index>(touched.size()));
  for (int r = 0; r < rows; ++r) {
    const bool listed = std::find(touched.begin(), touched.end(), r) != touched.end();
    for (int j = 0; j < C; ++j) {
      const int i = r * C + j;
      ASSERT_EQ(dst[i], listed ? before[i] + values[i] : before[i]) << "row " << r;
      ASSERT_EQ(src[i], r == 0 && j == 0 ? 1.0F : 0.0F) << "row " << r;
    }
  }
}

TEST_F(CpuKernels, LayerNormForwardAndBackward) {
  const int N = 9, C = 70;
  const Vec x = random_vec(N * C, 20, 2.0F), w = random_vec(C, 21), b = random_vec(C, 22);
  const Vec dy = random_vec(N * C, 23), dres = random_vec(N * C, 24);
  Vec y(N * C), mean(N), rstd(N), dx(N * C), dw = random_vec(C, 25), db = random_vec(C, 26);
  std::vector<double> ey(N * C), edx(N * C), edw(dw.begin(), dw.end()), edb(db.begin(), db.end());
  for (int r = 0; r < N; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < C; ++i) m += x[r * C + i];
    m /= C;
    for (int i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m);
    const double s = 1.0 / std::sqrt(v / C + 1e-5);
    double dn_mean = 0, dn_n_mean = 0;
    for (int i = 0; i < C; ++i) {
      const double n = (x[r * C + i] - m) * s;
      ey[r * C + i] = n * w[i] + b[i];
      dn_mean += w[i] * dy[r * C + i] / C;
      dn_n_mean += w[i] * dy[r * C + i] * n / C;
      edw[i] += dy[r * C + i] * n;
      edb[i] += dy[r * C + i];
    }
    for (int i = 0; i < C; ++i) {
      const double n = (x[r * C + i] - m) * s;
      edx[r * C + i] = dres[r * C + i] + (w[i] * dy[r * C + i] - dn_mean - n * dn_n_mean) * s;
    }
  }
  be_->layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  expect_near_all(y, ey, 1e-5, "layernorm out");
  be_->layernorm_backward_input(dx.data(), dres.data(), dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
  expect_near_all(dx, edx, 1e-4, "layernorm dinp");
  be_->layernorm_backward_params(dw.data(), db.data(), dy.data(), x.data(), mean.data(),
                                 rstd.data(), N, C);
  expect_near_all(dw, edw, 1e-5, "layernorm dweight");
  expect_near_all(db, edb, 1e-5, "layernorm dbias");

  // dresidual may be null and may alias dinp.
  Vec alias = dres;
  be_->layernorm_backward_input(alias.data(), alias.data(), dy.data(), x.data(), w.data(),
                                mean.data(), rstd.data(), N, C);
  EXPECT_EQ(alias, dx);
  Vec no_res(N * C);
  be_->layernorm_backward_input(no_res.data(), nullptr, dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
  for (int i = 0; i < N * C; ++i) edx[i] -= dres[i];
  expect_near_all(no_res, edx, 1e-4, "layernorm dinp without residual");
}

TEST_F(CpuKernels, GeluForwardAndBackward) {
  Vec x = random_vec(1000, 30, 3.0F);
  x[0] = 0.0F;
  x[1] = 1e-6F;
  x[2] = -40.0F;
  x[3] = 40.0F;
  const Vec dy = random_vec(1000, 31);
  Vec y(1000), dx(1000);
  std::vector<double> ey(1000), edx(1000);
  const double k = std::sqrt(2.0 / M_PI);
  for (int i = 0; i < 1000; ++i) {
    const double v = x[i], t = std::tanh(k * (v + 0.044715 * v * v * v));
    ey[i] = 0.5 * v * (1 + t);
    edx[i] = (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v)) * dy[i];
  }
  be_->gelu_forward(y.data(), x.data(), 1000);
  be_->gelu_backward(dx.data(), x.data(), dy.data(), 1000);
  expect_near_all(y, ey, 2e-6, "gelu");
  expect_near_all(dx, edx, 2e-6, "gelu backward");
}

// The kernels run whole vectors of 8 floats and finish the tail of an array (or row) element by
// element, with the same arithmetic: equal inputs must give equal bits in either part.
TEST_F(CpuKernels, VectorAndTailElementsAgreeBitForBit) {
  const int body = 32, tail = 15, n = body + tail;
  Vec x = random_vec(n, 32, 4.0F);
  const float specials[] = {0.0F, -0.0F, 1e-30F, -200.0F, 200.0F, 88.5F, -87.5F, 1e-3F};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  std::copy_n(x.begin(), tail, x.begin() + body);  // the tail repeats the first elements
  const Vec dy = [&] {
    Vec v = random_vec(n, 33);
    std::copy_n(v.begin(), tail, v.begin() + body);
    return v;
  }();
  const auto expect_tail_repeats_body = [&](const Vec& out, const char* what) {
    for (int j = 0; j < tail; ++j) {
      EXPECT_EQ(0, std::memcmp(&out[j], &out[body + j], sizeof(float)))
          << what << ": element " << j << " gives " << out[j] << ", its copy in the tail "
          << out[body + j];
    }
  };
  Vec y(n), dx(n);
  be_->gelu_forward(y.data(), x.data(), n);
  be_->gelu_backward(dx.data(), x.data(), dy.data(), n);
  expect_tail_repeats_body(y, "gelu");
  expect_tail_repeats_body(dx, "gelu backward");
  // Softmax without the extremes, which would leave only zeros and ones.
  Vec logits = random_vec(n, 34, 4.0F);
  std::copy_n(logits.begin(), tail, logits.begin() + body);
  Vec losses(1);
  const std::int32_t target = 3;
  be_->softmax_cross_entropy_forward(logits.data(), losses.data(), &target, 1, n, n);
  expect_tail_repeats_body(logits, "softmax");
}

// Causal attention in double: att = softmax(q k^T / sqrt(hs)) below the diagonal, out = att v,
// and the backward from dout.
struct AttentionReference {
  std::vector<double> att, out, dqkv;
};
AttentionReference reference_attention(const Vec& qkv, const Vec& dout, int B, int T, int C,
                                       int H) {
  const int hs = C / H;
  AttentionReference r{std::vector<double>(B * H * T * T, 0.0), std::vector<double>(B * T * C, 0.0),
                       std::vector<double>(B * T * 3 * C, 0.0)};
  const auto at = [&](int b, int t, int part, int h, int i) {
    return static_cast<std::size_t>((b * T + t) * 3 * C + part * C + h * hs + i);
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      double* p = r.att.data() + (b * H + h) * T * T;
      for (int t = 0; t < T; ++t) {
        double mx = -1e300;
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < hs; ++i)
            dot += double(qkv[at(b, t, 0, h, i)]) * qkv[at(b, s, 1, h, i)];
          p[t * T + s] = dot / std::sqrt(double(hs));
          mx = std::max(mx, p[t * T + s]);
        }
        double sum = 0;
        for (int s = 0; s <= t; ++s) sum += (p[t * T + s] = std::exp(p[t * T + s] - mx));
        for (int s = 0; s <= t; ++s) p[t * T + s] /= sum;
        for (int i = 0; i < hs; ++i) {
          double y = 0;
          for (int s = 0; s <= t; ++s) y += p[t * T + s] * qkv[at(b, s, 2, h, i)];
          r.out[(b * T + t) * C + h * hs + i] = y;
        }
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> dp(T, 0.0);
        double dot = 0;
        for (int s = 0; s <= t; ++s) {
          for (int i = 0; i < hs; ++i) {
            dp[s] += double(dout[(b * T + t) * C + h * hs + i]) * qkv[at(b, s, 2, h, i)];
            r.dqkv[at(b, s, 2, h, i)] += p[t * T + s] * dout[(b * T + t) * C + h * hs + i];
          }
          dot += p[t * T + s] * dp[s];
        }
        for (int s = 0; s <= t; ++s) {
          const double ds = p[t * T + s] * (dp[s] - dot) / std::sqrt(double(hs));
          for (int i = 0; i < hs; ++i) {
            r.dqkv[at(b, t, 0, h, i)] += ds * qkv[at(b, s, 1, h, i)];
            r.dqkv[at(b, s, 1, h, i)] += ds * qkv[at(b, t, 0, h, i)];
          }
        }
      }
    }
  }
  return r;
}

// T = 11 fits in one block of the causal tiling; 64 fills one exactly, 150 spans three with a
// partial last block: every block reaches only to the diagonal, so each boundary case counts.
TEST_F(CpuKernels, CausalAttentionForwardAndBackward) {
  for (const int T : {11, 64, 150}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    const int B = 2, C = 24, H = 3;
    const Vec qkv = random_vec(B * T * 3 * C, 40, 1.5F), dout = random_vec(B * T * C, 41);
    const AttentionReference ref = reference_attention(qkv, dout, B, T, C, H);
    // NaN-filled outputs: an entry no kernel writes (a skipped masked score) shows up.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Vec att(B * H * T * T, nan), out(B * T * C, nan), datt(att.size(), nan), dqkv(qkv.size(), nan);
    be_->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    expect_near_all(att, ref.att, 1e-5, "attention probabilities");
    expect_near_all(out, ref.out, 1e-5, "attention output");
    be_->attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                            H);
    expect_near_all(dqkv, ref.dqkv, 1e-5, "attention dqkv");
  }
}

// The FLOP count of `bench model` takes the share of score products the kernels compute: the
// block lower triangle of 64-row blocks, whole below one block.
TEST_F(CpuKernels, AttentionCountsTheProductsOfItsCausalBlocks) {
  EXPECT_DOUBLE_EQ(be_->attention_products_share(11), 1.0);
  EXPECT_DOUBLE_EQ(be_->attention_products_share(64), 1.0);
  EXPECT_DOUBLE_EQ(be_->attention_products_share(128), (64.0 * 64 + 64.0 * 128) / (128.0 * 128));
  EXPECT_DOUBLE_EQ(be_->attention_products_share(150),
                   (64.0 * 64 + 64.0 * 128 + 22.0 * 150) / (150.0 * 150));
  EXPECT_DOUBLE_EQ(be_->attention_products_share(1024), 17.0 / 32.0);
}

TEST_F(CpuKernels, SoftmaxCrossEntropyLeavesPaddingAlone) {
  const int N = 6, V = 37, ld = 48;
  Vec logits = random_vec(N * ld, 50, 3.0F);
  for (int r = 0; r < N; ++r) {
    for (int i = V; i < ld; ++i) logits[r * ld + i] = 12345.0F;  // padding sentinel
  }
  logits[5] = 80.0F;  // a dominant logit must not overflow
  const Vec x = logits;
  const std::vector<std::int32_t> targets{0, 36, 5, 17, 17, 1};
  Vec losses(N);
  be_->softmax_cross_entropy_forward(logits.data(), losses.data(), targets.data(), N, V, ld);
  std::vector<double> ep(N * ld), el(N);
  for (int r = 0; r < N; ++r) {
    double mx = -1e30, sum = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(x[r * ld + i]));
    for (int i = 0; i < V; ++i) sum += std::exp(x[r * ld + i] - mx);
    for (int i = 0; i < ld; ++i)
      ep[r * ld + i] = i < V ? std::exp(x[r * ld + i] - mx) / sum : 12345.0;
    el[r] = std::log(sum) + mx - x[r * ld + targets[r]];
  }
  expect_near_all(logits, ep, 1e-5, "probabilities");
  expect_near_all(losses, el, 1e-5, "losses");
  be_->softmax_cross_entropy_backward(logits.data(), targets.data(), N, ld);
  for (int r = 0; r < N; ++r) ep[r * ld + targets[r]] -= 1.0;
  expect_near_all(logits, ep, 1e-5, "p - onehot");
}

TEST_F(CpuKernels, EmbeddingForwardAndBackwardWithRepeatedTokens) {
  const int B = 2, T = 5, C = 40, V = 7;
  const Vec wte = random_vec(V * C, 60), wpe = random_vec(T * C, 61),
            dy = random_vec(B * T * C, 62);
  const std::vector<std::int32_t> tokens{3, 3, 0, 6, 3, 1, 3, 3, 2, 6};
  Vec out(B * T * C), dwte = random_vec(V * C, 63), dwpe = random_vec(T * C, 64);
  std::vector<double> edwte(dwte.begin(), dwte.end()), edwpe(dwpe.begin(), dwpe.end());
  be_->embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  for (int bt = 0; bt < B * T; ++bt) {
    for (int i = 0; i < C; ++i) {
      ASSERT_EQ(out[bt * C + i], wte[tokens[bt] * C + i] + wpe[(bt % T) * C + i]);
      edwte[tokens[bt] * C + i] += dy[bt * C + i];
      edwpe[(bt % T) * C + i] += dy[bt * C + i];
    }
  }
  be_->embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), B, T, C);
  expect_near_all(dwte, edwte, 1e-5, "dwte");
  expect_near_all(dwpe, edwpe, 1e-5, "dwpe");
}

// --- optimizer -------------------------------------------------------------------------------

TEST_F(CpuKernels, AdamWUpdateFollowsTorchFormulas) {
  const int n = 333;
  Vec p = random_vec(n, 70), m = random_vec(n, 71, 0.01F), v = random_vec(n, 72, 0.01F);
  for (auto& x : v) x = x * x;
  const Vec g = random_vec(n, 73);
  AdamWArgs a;
  a.decay_factor = 0.99F;
  a.step_size = 0.002F;
  a.beta1 = 0.9F;
  a.one_minus_beta1 = 0.1F;
  a.beta2 = 0.95F;
  a.one_minus_beta2 = 0.05F;
  a.bias_correction2_sqrt = 0.5F;
  a.eps = 1e-8F;
  a.grad_scale = 0.25F;
  std::vector<double> ep(n), em(n), ev(n);
  for (int i = 0; i < n; ++i) {
    const double gi = static_cast<double>(g[i]) * a.grad_scale;
    em[i] = a.beta1 * m[i] + a.one_minus_beta1 * gi;
    ev[i] = a.beta2 * v[i] + a.one_minus_beta2 * gi * gi;
    ep[i] = p[i] * a.decay_factor - a.step_size * em[i] / (std::sqrt(ev[i]) / 0.5 + a.eps);
  }
  be_->adamw_update(p.data(), g.data(), m.data(), v.data(), n, a);
  expect_near_all(p, ep, 1e-6, "params");
  expect_near_all(m, em, 1e-6, "exp_avg");
  expect_near_all(v, ev, 1e-6, "exp_avg_sq");
}

TEST_F(CpuKernels, SumOfSquaresInDouble) {
  const Vec x = random_vec(100003, 80);
  double expected = 0;
  for (const float v : x) expected += static_cast<double>(v) * v;
  EXPECT_NEAR(be_->sum_of_squares(x.data(), 100003), expected, 1e-12 * expected);
  EXPECT_EQ(be_->sum_of_squares(x.data(), 0), 0.0);
}

TEST_F(CpuKernels, KernelsAreThreadIndependent) {
  // Sizes above the kernels' one-thread thresholds (2^19 elements), so that 2 threads do split.
  const int N = 2048, C = 320, V = 301;
  const Vec x = random_vec(N * C, 90), w = random_vec(C, 91), dy = random_vec(N * C, 92);
  const Vec logits = random_vec(N * V, 93);
  std::vector<std::int32_t> tokens(N);
  for (int i = 0; i < N; ++i) tokens[i] = (i * 7) % 5;
  expect_thread_independent([&] {
    Vec y(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C), dbias(C), g(N * C), dg(N * C);
    be_->layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), N, C);
    be_->layernorm_backward_input(dx.data(), dy.data(), dy.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), N, C);
    be_->layernorm_backward_params(dw.data(), db.data(), dy.data(), x.data(), mean.data(),
                                   rstd.data(), N, C);
    be_->bias_backward(dbias.data(), dy.data(), N, C);
    be_->gelu_forward(g.data(), x.data(), N * C);
    be_->gelu_backward(dg.data(), x.data(), dy.data(), N * C);
    // 8 heads of 64 x 64 attention over a qkv of 4 sequences.
    const Vec qkv = random_vec(4 * 64 * 3 * 64, 94);
    const Vec dy_att = random_vec(4 * 64 * 64, 95);
    Vec att(4 * 2 * 64 * 64), att_out(4 * 64 * 64), datt(att.size()), dqkv(qkv.size());
    be_->attention_forward(att_out.data(), att.data(), qkv.data(), 4, 64, 64, 2);
    be_->attention_backward(dqkv.data(), datt.data(), dy_att.data(), qkv.data(), att.data(), 4, 64,
                            64, 2);
    Vec probs = logits, losses(N);
    be_->softmax_cross_entropy_forward(probs.data(), losses.data(), tokens.data(), N, V, V);
    Vec dwte(5 * C), dwpe(32 * C);
    be_->embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), 64, 32, C);
    Vec p = x, m(N * C, 0.0F), v(N * C, 0.0F), sum = dy;
    be_->adamw_update(p.data(), dy.data(), m.data(), v.data(), N * C, AdamWArgs{});
    be_->accumulate(sum.data(), x.data(), N * C);
    Vec squares{static_cast<float>(be_->sum_of_squares(x.data(), N * C))};
    return std::vector<Vec>{y,       mean, rstd,  dx,     dw,   db,   dbias, g, dg,  att,
                            att_out, dqkv, probs, losses, dwte, dwpe, p,     m, sum, squares};
  });
}

TEST(Backend, UnknownBackendIsInputError) {
  EXPECT_THROW(parse_enum<BackendKind>("tpu"), InputError);
}

}  // namespace
}  // namespace chimera::backend
