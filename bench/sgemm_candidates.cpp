// One sgemm candidate (chosen at compile time by bench/sgemm_candidates.sh): best-of-5 GFLOP/s of
// row-major C = A B for each shape of the argument list "m,n,k,ta,tb ...".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#if defined(USE_EIGEN)
#include <Eigen/Dense>
#else
#include <cblas.h>
#endif

int main(int argc, char** argv) {
  for (int arg = 1; arg < argc; ++arg) {
    int m = 0, n = 0, k = 0, ta = 0, tb = 0;
    if (std::sscanf(argv[arg], "%d,%d,%d,%d,%d", &m, &n, &k, &ta, &tb) != 5) return 2;
    std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n),
        c(static_cast<std::size_t>(m) * n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.01F - 0.5F;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 89) * 0.01F - 0.4F;
    double best = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      const auto start = std::chrono::steady_clock::now();
#if defined(USE_EIGEN)
      using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      Eigen::Map<Matrix> ma(a.data(), ta ? k : m, ta ? m : k), mb(b.data(), tb ? n : k, tb ? k : n),
          mc(c.data(), m, n);
      if (ta && tb)
        mc.noalias() = ma.transpose() * mb.transpose();
      else if (ta)
        mc.noalias() = ma.transpose() * mb;
      else if (tb)
        mc.noalias() = ma * mb.transpose();
      else
        mc.noalias() = ma * mb;
#else
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                  n, k, 1.0F, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0F, c.data(), n);
#endif
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rep > 0 && s < best) best = s;
    }
    std::printf("  %-24s %7.1f GFLOP/s\n", argv[arg], 2.0 * m * n * k / best / 1e9);
  }
  return 0;
}
