// fp32 GEMM (row-major = row stride ld, column stride 1) on one of two engines:
// - oneDNN's matmul where its kernels use AVX-512 (or AMX): on a Zen 5 it ran the model's GEMMs
//   10-40% faster than BLIS 0.9, whose newest x86 kernels are Skylake-X's;
// - BLIS's typed expert API elsewhere (on an AVX2 CPU oneDNN's fp32 kernels were up to 1.5x
//   slower than BLIS's Zen 3 ones).
// CHIMERA_CPU_GEMM=blis|onednn overrides the choice (to compare them, or to test both).
//
// Threads: every engine call here is single-threaded, and a large GEMM is split into calls on
// slabs of C's rows (or columns, when C is wider than tall), handed to the OpenMP threads. BLIS's
// own threads synchronise with spinning barriers that never yield; on a machine shared with other
// jobs (the normal case on a login node or a laptop) a waiting thread burns its time slice while
// the one it waits for is descheduled: measured at 50% of a training step, and 1.5-5x slower
// GEMMs than the split, which meets one OpenMP barrier per GEMM.
//
// Results are bit-identical for any thread count. BLIS computes each element of C with the same
// micro-kernel arithmetic whatever the slab, so its slabs follow the thread count. oneDNN's sums
// over k can depend on the shape of the call (measured: slabs of other widths changed bits), so
// its slabs follow the GEMM's shape only, and its primitives are planned for one thread.
#include <blis.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "bf16_gemm.hpp"
#include "chimera/core/error.hpp"
#include "cpu_backend.hpp"
#include "onednn_matmul.hpp"

namespace chimera::backend::cpu {

// BLIS 0.9 does not recognise recent CPUs (e.g. AMD Zen 4/5) and falls back to its slow generic
// kernels there. Where the CPU has the AVX-512 subsets BLIS's Skylake-X kernels use, select those
// (measured on Zen 5: 310 GFLOP/s on 2 cores instead of 68). The environment variable is read
// once, at BLIS's first call, so this must run before any BLIS call; a user's BLIS_ARCH_TYPE wins.
void select_blis_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("BLIS_ARCH_TYPE") != nullptr) return;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(BLIS_ARCH_SKX)).c_str(), 0);
    }
    // BLIS checks BLIS_ARCH_TYPE against its table of kernels at the first query of its
    // architecture, and aborts when that table is not built yet: bli_arch_query_id() before any
    // other BLIS call (as in a bf16 run, whose GEMMs are oneDNN's) killed the process.
    bli_init();
  });
}

std::string blis_description() {
  select_blis_kernels();
  return fmt::format("BLIS {} ({} kernels)", bli_info_get_version_str(),
                     bli_arch_string(bli_arch_query_id()));
}

namespace {

Fp32GemmEngine detect_fp32_gemm_engine() {
  if (const char* env = std::getenv("CHIMERA_CPU_GEMM"); env != nullptr && *env != '\0') {
    const std::string_view name(env);
    if (name == "blis") return Fp32GemmEngine::Blis;
    if (name == "onednn") return Fp32GemmEngine::Onednn;
    throw InputError(fmt::format(
        "CHIMERA_CPU_GEMM={}: unknown fp32 GEMM engine (blis or onednn; unset: oneDNN where its "
        "kernels use AVX-512, else BLIS)",
        name));
  }
  return OnednnMatmul::runs_avx512() ? Fp32GemmEngine::Onednn : Fp32GemmEngine::Blis;
}

Fp32GemmEngine& engine_setting() {
  static Fp32GemmEngine engine = detect_fp32_gemm_engine();
  return engine;
}

// fp32 matmuls planned for one thread each, for the slabs (and attention heads) of every thread.
OnednnMatmul& fp32_matmul() {
  static OnednnMatmul matmul(OperandType::F32, Epilogue::OneDnnWhereSupported, Threads::Caller);
  return matmul;
}

// oneDNN's epilogue takes beta 0 or 1, the only ones the model uses; BLIS serves any other.
bool on_onednn(float beta) {
  return engine_setting() == Fp32GemmEngine::Onednn && (beta == 0.0F || beta == 1.0F);
}

}  // namespace

Fp32GemmEngine fp32_gemm_engine() {
  return engine_setting();
}

void use_fp32_gemm_engine(Fp32GemmEngine engine) {
  engine_setting() = engine;
}

std::string fp32_gemm_description() {
  if (fp32_gemm_engine() == Fp32GemmEngine::Onednn) return OnednnMatmul::description();
  return blis_description();
}

namespace {

// GEMMs with fewer multiply-adds than this run on one thread: waking the team costs more.
constexpr Index kParallelMinMultiplyAdds = Index{1} << 18;

int threads_for(Index m, Index n, Index k) {
  return m * n * k >= kParallelMinMultiplyAdds ? omp_get_max_threads() : 1;
}

trans_t blis_trans(Trans t) {
  return t == Trans::Yes ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
}

}  // namespace

void gemm_single_thread(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                        const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                        Index ldc) {
  if (on_onednn(beta)) {
    fp32_matmul().run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  rntm_t rntm;
  bli_rntm_init(&rntm);
  bli_rntm_set_num_threads(1, &rntm);
  // BLIS takes non-const pointers but reads A, B, alpha and beta only.
  bli_sgemm_ex(blis_trans(trans_a), blis_trans(trans_b), m, n, k, &alpha, const_cast<float*>(a),
               lda, 1, const_cast<float*>(b), ldb, 1, &beta, c, ldc, 1, nullptr, &rntm);
}

namespace {

// BLIS slabs for `threads` threads. Each slab repacks the operand that all slabs share (B for
// row slabs, A for column slabs), which costs about as much as computing ~750 rows (columns) of
// the slab, so slabs stay at least 768 long: one per thread for the block GEMMs, up to 8 per
// thread for the head's V-long GEMMs. More slabs than threads, handed out dynamically, let a
// thread that the OS does not deschedule take over the work of one that it does.
Index blis_slab_count(Index extent, int threads) {
  const Index wanted = std::clamp<Index>(extent / 768, threads, Index{8} * threads);
  return wanted / threads * threads;
}

// oneDNN slabs, from the extent alone: about 256 long, at least 4 where the extent has that many
// tiles (so the block GEMMs of the benchmark model keep 2 threads busy) and at most 64.
Index onednn_slab_count(Index extent, Index tile) {
  const Index tiles = std::max<Index>(1, extent / tile);
  return std::clamp<Index>(extent / 256, std::min<Index>(4, tiles), 64);
}

}  // namespace

void gemm_fp32(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) {
  const int threads = threads_for(m, n, k);
  const bool onednn = on_onednn(beta);
  // oneDNN's slabs do not depend on the threads, so one thread computes them too.
  const bool sliced = m * n * k >= kParallelMinMultiplyAdds && (onednn || threads > 1);
  if (!sliced) {
    gemm_single_thread(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const Index extent = by_rows ? m : n;
  const Index tile = by_rows ? 32 : 16;  // slab boundaries on micro-tile multiples
  const Index slabs = onednn ? onednn_slab_count(extent, tile) : blis_slab_count(extent, threads);
  const auto bound = [&](Index i) {
    return i == slabs ? extent : extent * i / slabs / tile * tile;
  };
  const int team = static_cast<int>(std::min<Index>(threads, slabs));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (Index i = 0; i < slabs; ++i) {
    const Index begin = bound(i), end = bound(i + 1);
    if (end <= begin) continue;
    if (by_rows) {
      const float* a_rows = trans_a == Trans::No ? a + begin * lda : a + begin;
      gemm_single_thread(trans_a, trans_b, end - begin, n, k, alpha, a_rows, lda, b, ldb, beta,
                         c + begin * ldc, ldc);
    } else {
      const float* b_cols = trans_b == Trans::No ? b + begin : b + begin * ldb;
      gemm_single_thread(trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_cols, ldb, beta,
                         c + begin, ldc);
    }
  }
}

void CpuBackend::gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                      const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                      Index ldc) {
  if (bf16_) {
    bf16_->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                threads_for(m, n, k) > 1);
  } else {
    gemm_fp32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void CpuBackend::gemm_one_thread(Trans trans_a, Trans trans_b, Index m, Index n, Index k,
                                 float alpha, const float* a, Index lda, const float* b, Index ldb,
                                 float beta, float* c, Index ldc) {
  if (bf16_) {
    bf16_->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, false);
  } else {
    gemm_single_thread(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void CpuBackend::gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k,
                                      float alpha, const float* a, Index lda, Index stride_a,
                                      const float* b, Index ldb, Index stride_b, float beta,
                                      float* c, Index ldc, Index stride_c, Index batch) {
  const int threads = threads_for(m, n, k * batch);
  if (threads > 1 && batch >= threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (Index i = 0; i < batch; ++i) {
      gemm_one_thread(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
                      ldb, beta, c + i * stride_c, ldc);
    }
  } else {
    for (Index i = 0; i < batch; ++i) {
      gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
           c + i * stride_c, ldc);
    }
  }
}

}  // namespace chimera::backend::cpu
