// Every kernel of the CUDA backend against the CPU backend (the oracle) on the same inputs, and a
// whole training step of a small GPT-2 (loss and every gradient). fp32: 1e-5 relative; tf32 GEMMs:
// the tolerance of docs/cuda.md; bf16: the rounding bounds the CPU's bf16 paths are held to
// (tests/support/bf16_*.hpp, docs/precision.md), so that the numerics the GPU runs are also the
// ones tested on any CPU through bf16-emulated. Without a usable GPU every test is skipped with the
// backend's own message (no device, no driver).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bf16_gemm_bound.hpp"
#include "bf16_step_tolerance.hpp"
#include "chimera/backend/backend.hpp"
#include "chimera/backend/buffer.hpp"
#include "chimera/core/error.hpp"
#include "chimera/model/worker.hpp"

namespace chimera::backend {
namespace {

using Vec = std::vector<float>;

// Tolerances (relative to |expected| + rms(expected)); docs/cuda.md explains them.
constexpr double kFp32Tol = 1e-5;
constexpr double kTf32GemmTol = 5e-3;  // 10-bit mantissa inputs
constexpr double kStepTol = 1e-4;      // a whole forward + backward in fp32

Vec random_vec(std::size_t n, std::uint32_t seed, float scale = 1.0F) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0F, scale);
  Vec v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

void expect_close(const Vec& actual, const Vec& expected, double tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double sum_sq = 0;
  for (const float e : expected) sum_sq += static_cast<double>(e) * e;
  const double rms =
      std::sqrt(sum_sq / static_cast<double>(std::max<std::size_t>(1, expected.size())));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_LE(std::abs(static_cast<double>(actual[i]) - expected[i]),
              tol * (std::abs(static_cast<double>(expected[i])) + rms))
        << what << "[" << i << "] = " << actual[i] << ", CPU " << expected[i];
  }
}

// The CUDA backend at `precision`, or the reason there is none (then the test skips).
std::unique_ptr<Backend> try_cuda(const std::string& precision, std::string& why) {
  try {
    BackendOptions options;
    options.precision = precision;
    return make_backend(BackendKind::Cuda, options);
  } catch (const InputError& e) {
    why = e.what();
    return nullptr;
  }
}

#define CHIMERA_SKIP_WITHOUT_GPU(gpu, why) \
  if (!(gpu)) GTEST_SKIP() << "no usable GPU: " << (why)

// One array on both backends, filled from the same host data.
template <typename T>
class Twin {
 public:
  Twin(Backend& cpu, Backend& gpu, const std::vector<T>& host)
      : cpu_(cpu), gpu_(gpu), n_(host.size()), a_(cpu, bytes()), b_(gpu, bytes()) {
    cpu.copy_from_host(a_.data(), host.data(), bytes());
    gpu.copy_from_host(b_.data(), host.data(), bytes());
  }
  T* cpu() { return static_cast<T*>(a_.data()); }
  T* gpu() { return static_cast<T*>(b_.data()); }
  std::vector<T> read_cpu() const { return read(cpu_, a_); }
  std::vector<T> read_gpu() const { return read(gpu_, b_); }

 private:
  std::size_t bytes() const { return std::max<std::size_t>(1, n_) * sizeof(T); }
  std::vector<T> read(Backend& be, const DeviceBuffer& buf) const {
    std::vector<T> out(n_);
    be.copy_to_host(out.data(), buf.data(), n_ * sizeof(T));
    return out;
  }
  Backend& cpu_;
  Backend& gpu_;
  std::size_t n_;
  DeviceBuffer a_, b_;
};

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = try_cuda("fp32", why_);
    CHIMERA_SKIP_WITHOUT_GPU(gpu_, why_);
  }
  void expect_same(const Twin<float>& x, double tol, const std::string& what) {
    expect_close(x.read_gpu(), x.read_cpu(), tol, what);
  }
  std::unique_ptr<Backend> cpu_ = make_backend(BackendKind::Cpu);
  std::unique_ptr<Backend> gpu_;
  std::string why_;
};

TEST_F(CudaVsCpu, GemmEveryTransposeWithBeta) {
  const int m = 37, n = 29, k = 53;
  for (const Trans ta : {Trans::No, Trans::Yes}) {
    for (const Trans tb : {Trans::No, Trans::Yes}) {
      const int lda = (ta == Trans::Yes ? m : k) + 3, ldb = (tb == Trans::Yes ? k : n) + 1;
      const int ldc = n + 2;
      Twin<float> a(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(lda) * std::max(m, k), 1));
      Twin<float> b(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(ldb) * std::max(n, k), 2));
      Twin<float> c(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(ldc) * m, 3));
      for (Backend* be : {cpu_.get(), gpu_.get()}) {
        const bool on_gpu = be == gpu_.get();
        be->gemm(ta, tb, m, n, k, 0.7F, on_gpu ? a.gpu() : a.cpu(), lda, on_gpu ? b.gpu() : b.cpu(),
                 ldb, 0.5F, on_gpu ? c.gpu() : c.cpu(), ldc);
      }
      expect_same(c, kFp32Tol, "gemm");
    }
  }
}

TEST_F(CudaVsCpu, GemmStridedBatched) {
  const int m = 16, n = 12, k = 20, batch = 5;
  Twin<float> a(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(m * k * batch), 4));
  Twin<float> b(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(n * k * batch), 5));
  Twin<float> c(*cpu_, *gpu_, Vec(static_cast<std::size_t>(m * n * batch), 0.0F));
  cpu_->gemm_strided_batched(Trans::No, Trans::Yes, m, n, k, 1.0F, a.cpu(), k, m * k, b.cpu(), k,
                             n * k, 0.0F, c.cpu(), n, m * n, batch);
  gpu_->gemm_strided_batched(Trans::No, Trans::Yes, m, n, k, 1.0F, a.gpu(), k, m * k, b.gpu(), k,
                             n * k, 0.0F, c.gpu(), n, m * n, batch);
  expect_same(c, kFp32Tol, "gemm_strided_batched");
}

TEST_F(CudaVsCpu, ElementwiseAndBias) {
  const int N = 70, C = 48;
  const auto n = static_cast<std::size_t>(N * C);
  Twin<float> x(*cpu_, *gpu_, random_vec(n, 6)), y(*cpu_, *gpu_, random_vec(n, 7));
  Twin<float> bias(*cpu_, *gpu_, random_vec(C, 8)), out(*cpu_, *gpu_, Vec(n, 0.0F));
  Twin<float> dbias(*cpu_, *gpu_, random_vec(C, 9)), g(*cpu_, *gpu_, Vec(n, 0.0F));
  for (Backend* be : {cpu_.get(), gpu_.get()}) {
    auto p = [&](Twin<float>& t) { return be == gpu_.get() ? t.gpu() : t.cpu(); };
    be->accumulate(p(y), p(x), N * C);
    be->broadcast_bias(p(out), p(x), p(bias), N, C);
    be->bias_backward(p(dbias), p(y), N, C);
    be->gelu_forward(p(g), p(x), N * C);
    be->gelu_backward(p(x), p(y), p(out), N * C);
  }
  expect_same(y, kFp32Tol, "accumulate");
  expect_same(out, kFp32Tol, "broadcast_bias");
  expect_same(dbias, kFp32Tol, "bias_backward");
  expect_same(g, kFp32Tol, "gelu_forward");
  expect_same(x, kFp32Tol, "gelu_backward");
}

TEST_F(CudaVsCpu, EmbeddingWithRepeatedTokens) {
  const int B = 3, T = 9, C = 40, V = 17;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 5 * 3);
  Twin<std::int32_t> tokens(*cpu_, *gpu_, ids);
  Twin<float> wte(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(V * C), 10));
  Twin<float> wpe(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(T * C), 11));
  Twin<float> out(*cpu_, *gpu_, Vec(static_cast<std::size_t>(B * T * C), 0.0F));
  Twin<float> dout(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(B * T * C), 12));
  Twin<float> dwte(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(V * C), 13));
  Twin<float> dwpe(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(T * C), 14));
  for (Backend* be : {cpu_.get(), gpu_.get()}) {
    const bool on_gpu = be == gpu_.get();
    auto p = [&](Twin<float>& t) { return on_gpu ? t.gpu() : t.cpu(); };
    const std::int32_t* tok = on_gpu ? tokens.gpu() : tokens.cpu();
    be->embedding_forward(p(out), tok, p(wte), p(wpe), B, T, C);
    be->embedding_backward(p(dwte), p(dwpe), p(dout), tok, B, T, C);
  }
  expect_same(out, kFp32Tol, "embedding_forward");
  expect_same(dwte, kFp32Tol, "embedding_backward dwte");
  expect_same(dwpe, kFp32Tol, "embedding_backward dwpe");
}

TEST_F(CudaVsCpu, LayerNormForwardAndBothBackwardHalves) {
  const int N = 45, C = 72;
  const auto n = static_cast<std::size_t>(N * C);
  Twin<float> inp(*cpu_, *gpu_, random_vec(n, 15, 2.0F)), w(*cpu_, *gpu_, random_vec(C, 16));
  Twin<float> b(*cpu_, *gpu_, random_vec(C, 17)), out(*cpu_, *gpu_, Vec(n, 0.0F));
  Twin<float> mean(*cpu_, *gpu_, Vec(N, 0.0F)), rstd(*cpu_, *gpu_, Vec(N, 0.0F));
  Twin<float> dout(*cpu_, *gpu_, random_vec(n, 18)), dres(*cpu_, *gpu_, random_vec(n, 19));
  Twin<float> dinp(*cpu_, *gpu_, Vec(n, 0.0F));
  Twin<float> dw(*cpu_, *gpu_, random_vec(C, 20)), db(*cpu_, *gpu_, random_vec(C, 21));
  for (Backend* be : {cpu_.get(), gpu_.get()}) {
    auto p = [&](Twin<float>& t) { return be == gpu_.get() ? t.gpu() : t.cpu(); };
    be->layernorm_forward(p(out), p(mean), p(rstd), p(inp), p(w), p(b), N, C);
    be->layernorm_backward_input(p(dinp), p(dres), p(dout), p(inp), p(w), p(mean), p(rstd), N, C);
    be->layernorm_backward_params(p(dw), p(db), p(dout), p(inp), p(mean), p(rstd), N, C);
  }
  expect_same(out, kFp32Tol, "layernorm out");
  expect_same(mean, kFp32Tol, "layernorm mean");
  expect_same(rstd, kFp32Tol, "layernorm rstd");
  expect_same(dinp, kFp32Tol, "layernorm dinp");
  expect_same(dw, kFp32Tol, "layernorm dweight");
  expect_same(db, kFp32Tol, "layernorm dbias");
}

TEST_F(CudaVsCpu, CausalAttentionForwardBackward) {
  const int B = 2, T = 37, C = 48, H = 4;  // T > 32: several lanes per softmax row
  const auto bt = static_cast<std::size_t>(B * T), att_n = static_cast<std::size_t>(B * H * T * T);
  Twin<float> qkv(*cpu_, *gpu_, random_vec(bt * 3 * C, 22));
  Twin<float> out(*cpu_, *gpu_, Vec(bt * C, 0.0F)), att(*cpu_, *gpu_, Vec(att_n, 0.0F));
  Twin<float> dout(*cpu_, *gpu_, random_vec(bt * C, 23));
  Twin<float> dqkv(*cpu_, *gpu_, Vec(bt * 3 * C, 0.0F)), datt(*cpu_, *gpu_, Vec(att_n, 0.0F));
  for (Backend* be : {cpu_.get(), gpu_.get()}) {
    auto p = [&](Twin<float>& t) { return be == gpu_.get() ? t.gpu() : t.cpu(); };
    be->attention_forward(p(out), p(att), p(qkv), B, T, C, H);
    be->attention_backward(p(dqkv), p(datt), p(dout), p(qkv), p(att), B, T, C, H);
  }
  expect_same(att, kFp32Tol, "attention probabilities");
  expect_same(out, kFp32Tol, "attention out");
  expect_same(dqkv, kFp32Tol, "attention dqkv");
}

TEST_F(CudaVsCpu, SoftmaxCrossEntropyWithPaddedRows) {
  const int N = 21, V = 1000, ld = 1024;  // padded vocabulary
  std::vector<std::int32_t> ids(N);
  for (int i = 0; i < N; ++i) ids[static_cast<std::size_t>(i)] = (i * 131) % V;
  Twin<std::int32_t> targets(*cpu_, *gpu_, ids);
  Twin<float> logits(*cpu_, *gpu_, random_vec(static_cast<std::size_t>(N * ld), 24, 3.0F));
  Twin<float> losses(*cpu_, *gpu_, Vec(N, 0.0F));
  for (Backend* be : {cpu_.get(), gpu_.get()}) {
    const bool on_gpu = be == gpu_.get();
    auto p = [&](Twin<float>& t) { return on_gpu ? t.gpu() : t.cpu(); };
    const std::int32_t* tgt = on_gpu ? targets.gpu() : targets.cpu();
    be->softmax_cross_entropy_forward(p(logits), p(losses), tgt, N, V, ld);
  }
  expect_same(losses, kFp32Tol, "cross-entropy losses");
  // Only the first V columns of each row are probabilities; the padding is not compared.
  auto first_v = [&](const Vec& all) {
    Vec out;
    for (int r = 0; r < N; ++r)
      out.insert(out.end(), all.begin() + r * ld, all.begin() + r * ld + V);
    return out;
  };
  expect_close(first_v(logits.read_gpu()), first_v(logits.read_cpu()), kFp32Tol, "probabilities");
  cpu_->softmax_cross_entropy_backward(logits.cpu(), targets.cpu(), N, ld);
  gpu_->softmax_cross_entropy_backward(logits.gpu(), targets.gpu(), N, ld);
  expect_close(first_v(logits.read_gpu()), first_v(logits.read_cpu()), kFp32Tol, "dlogits");
}

TEST_F(CudaVsCpu, AdamWAndSumOfSquares) {
  const std::size_t n = 100003;  // not a multiple of any block size
  Twin<float> p(*cpu_, *gpu_, random_vec(n, 25)), g(*cpu_, *gpu_, random_vec(n, 26));
  Twin<float> m(*cpu_, *gpu_, random_vec(n, 27, 0.1F)), v(*cpu_, *gpu_, Vec(n, 0.02F));
  AdamWArgs args;
  args.step_size = 1e-3F;
  args.decay_factor = 1.0F - 1e-3F * 0.1F;
  args.bias_correction2_sqrt = 0.3F;
  args.grad_scale = 0.8F;
  cpu_->adamw_update(p.cpu(), g.cpu(), m.cpu(), v.cpu(), static_cast<Index>(n), args);
  gpu_->adamw_update(p.gpu(), g.gpu(), m.gpu(), v.gpu(), static_cast<Index>(n), args);
  expect_same(p, kFp32Tol, "adamw params");
  expect_same(m, kFp32Tol, "adamw m");
  expect_same(v, kFp32Tol, "adamw v");
  const double expected = cpu_->sum_of_squares(g.cpu(), static_cast<Index>(n));
  EXPECT_NEAR(gpu_->sum_of_squares(g.gpu(), static_cast<Index>(n)), expected, 1e-12 * expected);
}

// The sharded optimizer's NCCL halves in a group of one (one process has one rank; the GPU
// bundle's multi-rank runs share one GPU, which NCCL refuses): ordered after the kernel that
// wrote the buffer, completed through the tickets, the buffer its own sum and its own gather, and
// shard bounds that do not fit the group refused.
TEST_F(CudaVsCpu, NcclReduceScatterAndAllGatherInAGroupOfOne) {
  if (!gpu_->has_device_groups()) GTEST_SKIP() << "this build has no NCCL";
  const auto group = gpu_->join_device_group(gpu_->new_device_group_id(), 1, 0);
  const std::size_t n = 100003;
  const Vec host = random_vec(n, 31), twice = [&] {
    Vec x = host;
    for (float& v : x) v *= 2.0F;
    return x;
  }();
  Twin<float> a(*cpu_, *gpu_, host), b(*cpu_, *gpu_, host);
  const std::vector<std::size_t> bounds{0, n};
  gpu_->accumulate(a.gpu(), b.gpu(), static_cast<Index>(n));  // a = 2 host, before the sum
  const auto sum = group->start_reduce_scatter(a.gpu(), bounds);
  while (!group->finished(sum)) {
  }
  expect_close(a.read_gpu(), twice, 0.0, "reduce-scatter of one rank");
  const auto gather = group->start_all_gather(a.gpu(), bounds);
  while (!group->finished(gather)) {
  }
  expect_close(a.read_gpu(), twice, 0.0, "all-gather of one rank");
  const std::vector<std::size_t> two_shards{0, n / 2, n};
  EXPECT_THROW(group->start_reduce_scatter(a.gpu(), two_shards), Error);
}

// Tensor-core GEMMs: tf32 at its documented tolerance, bf16 within the rounding bound of every
// element against exact products; neither bit-equal to fp32 (so the compute type really changed).
TEST(CudaPrecision, Bf16AndTf32GemmsWithinTheirTolerances) {
  std::string why;
  auto fp32 = try_cuda("fp32", why);
  CHIMERA_SKIP_WITHOUT_GPU(fp32, why);
  auto cpu = make_backend(BackendKind::Cpu);
  const int m = 64, n = 64, k = 256;
  const Vec ha = random_vec(static_cast<std::size_t>(m * k), 28);
  const Vec hb = random_vec(static_cast<std::size_t>(k * n), 29);
  for (const char* precision : {"bf16", "tf32"}) {
    auto fast = try_cuda(precision, why);
    if (!fast) GTEST_SKIP() << precision << ": " << why;  // e.g. a GPU before Ampere
    Twin<float> a(*cpu, *fast, ha), b(*cpu, *fast, hb), c(*cpu, *fast, Vec(m * n, 0.0F));
    cpu->gemm(Trans::No, Trans::No, m, n, k, 1.0F, a.cpu(), k, b.cpu(), n, 0.0F, c.cpu(), n);
    fast->gemm(Trans::No, Trans::No, m, n, k, 1.0F, a.gpu(), k, b.gpu(), n, 0.0F, c.gpu(), n);
    const Vec got = c.read_gpu();
    EXPECT_NE(got, c.read_cpu()) << precision << " GEMM is bit-equal to fp32";
    if (std::string(precision) == "tf32") {
      expect_close(got, c.read_cpu(), kTf32GemmTol, precision);
      continue;
    }
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double exact = 0, magnitudes = 0;
        for (int p = 0; p < k; ++p) {
          const double product = static_cast<double>(ha[i * k + p]) * hb[p * n + j];
          exact += product;
          magnitudes += std::abs(product);
        }
        ASSERT_LE(std::abs(got[i * n + j] - exact),
                  testing::bf16_gemm_bound(1.0, magnitudes, 0.0, 0.0, k))
            << "bf16 C[" << i << "," << j << "]";
      }
    }
  }
}

TEST(CudaBackend, DescribesItsDeviceAndPeak) {
  std::string why;
  auto gpu = try_cuda("bf16", why);
  if (!gpu) gpu = try_cuda("fp32", why);
  CHIMERA_SKIP_WITHOUT_GPU(gpu, why);
  EXPECT_FALSE(gpu->host_memory());
  EXPECT_NE(gpu->description().find("cuda:"), std::string::npos) << gpu->description();
  EXPECT_FALSE(gpu->device_id().empty());
}

// --- a training step ---------------------------------------------------------------------------

struct StepResult {
  float loss = 0;
  std::vector<Vec> grads;  // per stage, then the tied embedding
};

StepResult train_step(Backend& be) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_embd = 64;
  mc.n_head = 4;
  mc.n_ctx = 32;
  mc.vocab_size = 101;
  const auto config = model::GPT2Config::from(mc);
  const int B = 2, T = 32;
  model::GPT2Worker worker(be, config, model::StagePartition({2}), {0}, {B, T, false});
  worker.init_parameters(5);
  worker.zero_grad();
  std::vector<std::int32_t> tokens(B * T), targets(B * T);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % 101);
    targets[i] = static_cast<std::int32_t>((i * 53 + 3) % 101);
  }
  StepResult r;
  r.loss = worker.forward(0, 0, {tokens, nullptr, targets, 1.0F}, nullptr);
  worker.backward(0, 0, nullptr, nullptr);
  worker.finalize_tied_grads();
  for (auto view : {worker.grads(0), worker.tied_grads()}) {
    Vec host(view.count);
    be.copy_to_host(host.data(), view.data, view.count * sizeof(float));
    r.grads.push_back(std::move(host));
  }
  return r;
}

TEST(CudaTraining, OneStepLossAndGradientsMatchTheCpu) {
  std::string why;
  auto gpu = try_cuda("fp32", why);
  CHIMERA_SKIP_WITHOUT_GPU(gpu, why);
  auto cpu = make_backend(BackendKind::Cpu);
  const StepResult expected = train_step(*cpu);
  const StepResult actual = train_step(*gpu);
  EXPECT_NEAR(actual.loss, expected.loss, kFp32Tol * expected.loss);
  ASSERT_EQ(actual.grads.size(), expected.grads.size());
  for (std::size_t i = 0; i < expected.grads.size(); ++i) {
    expect_close(actual.grads[i], expected.grads[i], kStepTol,
                 i + 1 < expected.grads.size() ? "stage gradient" : "tied gradient");
  }
}

double norm_relative_error(const Vec& actual, const Vec& expected) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    err += d * d;
    ref += static_cast<double>(expected[i]) * expected[i];
  }
  return std::sqrt(err / ref);
}

// The GPU's bf16 step at the tolerance the CPU's bf16 step is held to (test_bf16_step.cpp),
// against the CPU in fp32 and against the CPU's bf16 emulation (same rounding, other sum order).
TEST(CudaTraining, Bf16StepWithinTheBf16StepTolerance) {
  std::string why;
  auto gpu = try_cuda("bf16", why);
  CHIMERA_SKIP_WITHOUT_GPU(gpu, why);
  const StepResult actual = train_step(*gpu);
  for (const char* oracle : {"fp32", "bf16-emulated"}) {
    BackendOptions options;
    options.precision = oracle;
    auto cpu = make_backend(BackendKind::Cpu, options);
    const StepResult expected = train_step(*cpu);
    ASSERT_EQ(actual.grads.size(), expected.grads.size());
    double worst = 0;
    for (std::size_t i = 0; i < expected.grads.size(); ++i) {
      const double err = norm_relative_error(actual.grads[i], expected.grads[i]);
      EXPECT_LE(err, testing::kBf16StepTol) << oracle << " gradient buffer " << i;
      worst = std::max(worst, err);
    }
    if (std::string(oracle) == "fp32") {
      EXPECT_GE(worst, testing::kBf16StepMinError) << "bf16 gradients are as close as fp32's";
    }
  }
}

}  // namespace
}  // namespace chimera::backend
