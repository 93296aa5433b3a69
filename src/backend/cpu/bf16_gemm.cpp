// The two bf16 GEMMs of the CPU backend and the converted copies of weights (bf16_gemm.hpp).
#include "bf16_gemm.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "bf16.hpp"
#include "chimera/core/error.hpp"
#include "cpu_backend.hpp"
#include "onednn_matmul.hpp"
#include "scratch.hpp"

namespace chimera::backend::cpu {

void Bf16Gemm::register_weights(const float* data, Index n) {
  const std::lock_guard lock(mutex_);
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  ranges_.push_back({begin, begin + n * static_cast<Index>(sizeof(float)), 1});
}

void Bf16Gemm::weights_written(const void* dst, std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  const auto* begin = static_cast<const std::byte*>(dst);
  const auto* end = begin + bytes;
  for (Range& r : ranges_) {
    if (r.overlaps(begin, end)) ++r.generation;
  }
}

void Bf16Gemm::forget(const void* ptr, std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  const auto* begin = static_cast<const std::byte*>(ptr);
  const auto* end = begin + bytes;
  const auto overlaps = [&](const Range& r) { return r.overlaps(begin, end); };
  if (std::none_of(ranges_.begin(), ranges_.end(), overlaps)) return;
  std::erase_if(ranges_, overlaps);
  drop_copies(begin, end);
}

void Bf16Gemm::gemm_bf16_a(Trans, Trans, Index, Index, Index, float, const Bf16Bits*, Index,
                           const float*, Index, float, float*, Index) {
  CHIMERA_CHECK(false, "{} take no bf16 operands", description());
}

void Bf16Gemm::gemm_rounded_a(Trans, Trans, Index, Index, Index, float, const float*, Index,
                              const float*, Index, float, float*, Index) {
  CHIMERA_CHECK(false, "{} take no rounded fp32 operands", description());
}

int Bf16Gemm::weight_range(const float* src, Index rows, Index cols, Index ld) const {
  if (rows == 0 || cols == 0) return -1;
  const auto* begin = reinterpret_cast<const std::byte*>(src);
  const auto* end = reinterpret_cast<const std::byte*>(src + (rows - 1) * ld + cols);
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if (ranges_[i].begin <= begin && end <= ranges_[i].end) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Operands converted to `Element` (bf16 bits for oneDNN, bf16-rounded floats for the emulation),
// stored densely (row stride = columns) in the orientation the caller stored them.
template <typename Element>
class ConvertingGemm : public Bf16Gemm {
 public:
  void gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
            Index lda, const float* b, Index ldb, float beta, float* c, Index ldc,
            bool team) final {
    const Index a_rows = trans_a == Trans::No ? m : k, a_cols = trans_a == Trans::No ? k : m;
    const Index b_rows = trans_b == Trans::No ? k : n, b_cols = trans_b == Trans::No ? n : k;
    thread_local Scratch<Element> a_scratch, b_scratch;
    const Element* a_converted = operand(a, a_rows, a_cols, lda, a_scratch, team);
    const Element* b_converted = operand(b, b_rows, b_cols, ldb, b_scratch, team);
    compute(trans_a, trans_b, m, n, k, alpha, a_converted, a_cols, b_converted, b_cols, beta, c,
            ldc, team);
  }

  bool multiplies_bf16_bits() const final { return std::is_same_v<Element, Bf16Bits>; }

 protected:
  virtual void compute(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                       const Element* a, Index lda, const Element* b, Index ldb, float beta,
                       float* c, Index ldc, bool team) = 0;

  // gemm() with A converted by the caller; on the team.
  void gemm_converted_a(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                        const Element* a, Index lda, const float* b, Index ldb, float beta,
                        float* c, Index ldc) {
    const Index b_rows = trans_b == Trans::No ? k : n, b_cols = trans_b == Trans::No ? n : k;
    thread_local Scratch<Element> b_scratch;
    const Element* b_converted = operand(b, b_rows, b_cols, ldb, b_scratch, true);
    compute(trans_a, trans_b, m, n, k, alpha, a, lda, b_converted, b_cols, beta, c, ldc, true);
  }

 private:
  void convert(Element* dst, const float* src, Index rows, Index cols, Index ld, bool team) {
    // Timed for profiles where one thread accounts for it (attention heads convert inside
    // their parallel region and count as attention).
    const bool timed = omp_in_parallel() == 0;
    const auto start =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if constexpr (std::is_same_v<Element, float>) {
      round_to_bf16(dst, src, rows, cols, ld, team);
    } else {
      convert_to_bf16(dst, src, rows, cols, ld, team);
    }
    if (timed) {
      conversion_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }

  // The converted stored matrix: a current copy of registered weights, else `scratch`.
  const Element* operand(const float* src, Index rows, Index cols, Index ld,
                         Scratch<Element>& scratch, bool team) {
    {
      const std::lock_guard lock(mutex_);
      const int range = weight_range(src, rows, cols, ld);
      if (range >= 0) {
        Copy& copy = copies_[{src, rows, cols, ld}];
        const std::uint64_t generation = ranges_[static_cast<std::size_t>(range)].generation;
        if (copy.generation != generation) {
          copy.data.resize(static_cast<std::size_t>(rows * cols));
          convert(copy.data.data(), src, rows, cols, ld, team);
          copy.generation = generation;
          ++weight_conversions_;
        }
        return copy.data.data();
      }
    }
    Element* converted = scratch.get(static_cast<std::size_t>(rows * cols));
    convert(converted, src, rows, cols, ld, team);
    return converted;
  }

  void drop_copies(const std::byte* begin, const std::byte* end) final {
    std::erase_if(copies_, [&](const auto& entry) {
      const auto* src = reinterpret_cast<const std::byte*>(std::get<0>(entry.first));
      return begin <= src && src < end;
    });
  }

  struct Copy {
    std::uint64_t generation = 0;  // of its range when converted; ranges start at 1
    std::vector<Element> data;
  };
  std::map<std::tuple<const float*, Index, Index, Index>, Copy> copies_;
};

class EmulatedBf16Gemm final : public ConvertingGemm<float> {
 public:
  explicit EmulatedBf16Gemm(std::string bf16_note) : bf16_note_(std::move(bf16_note)) {}
  std::string description() const override {
    if (bf16_note_.empty()) {
      return "bf16 GEMMs emulated (operands rounded to bf16, then fp32 GEMMs on " +
             fp32_gemm_description() + ")";
    }
    return "bf16 GEMMs on the fp32 units (operands rounded to bf16, then fp32 GEMMs on " +
           fp32_gemm_description() + "): " + bf16_note_;
  }

  void gemm_rounded_a(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                      const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                      Index ldc) override {
    gemm_converted_a(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

 protected:
  void compute(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc,
               bool team) override {
    if (team) {
      gemm_fp32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
      gemm_single_thread(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }

 private:
  std::string bf16_note_;
};

class OnednnBf16Gemm final : public ConvertingGemm<Bf16Bits> {
 public:
  explicit OnednnBf16Gemm(std::string bf16_note)
      : matmul_(OperandType::Bf16), bf16_note_(std::move(bf16_note)) {}
  std::string description() const override {
    const std::string engine = "bf16 GEMMs on " + OnednnMatmul::description();
    return bf16_note_.empty() ? engine : engine + ": " + bf16_note_;
  }

  void gemm_bf16_a(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                   const Bf16Bits* a, Index lda, const float* b, Index ldb, float beta, float* c,
                   Index ldc) override {
    gemm_converted_a(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

 protected:
  // oneDNN uses the OpenMP team, or only this thread inside a parallel region (attention heads).
  void compute(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
               const Bf16Bits* a, Index lda, const Bf16Bits* b, Index ldb, float beta, float* c,
               Index ldc, bool /*team*/) override {
    matmul_.run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

 private:
  OnednnMatmul matmul_;
  std::string bf16_note_;
};

// GFLOP/s of an n^3 GEMM on each engine, the best of three runs after a warm-up, the engines
// taking turns so that other jobs on the machine slow both alike. The operands are registered
// weights, converted once in the warm-up, as the bench's GEMM probe has them.
std::pair<double, double> probe_gflops(Bf16Gemm& first, Bf16Gemm& second, Index n) {
  std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(static_cast<int>(i % 61) - 30) / 32.0F;
    b[i] = static_cast<float>(static_cast<int>(i % 53) - 26) / 32.0F;
  }
  double best[2] = {0, 0};
  Bf16Gemm* engines[2] = {&first, &second};
  for (Bf16Gemm* engine : engines) {
    engine->register_weights(a.data(), n * n);
    engine->register_weights(b.data(), n * n);
  }
  for (int run = 0; run < 4; ++run) {
    for (int e = 0; e < 2; ++e) {
      const auto start = std::chrono::steady_clock::now();
      engines[e]->gemm(Trans::No, Trans::No, n, n, n, 1.0F, a.data(), n, b.data(), n, 0.0F,
                       c.data(), n, true);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (run > 0) best[e] = best[e] == 0 ? s : std::min(best[e], s);
    }
  }
  for (Bf16Gemm* engine : engines) {
    engine->forget(a.data(), a.size() * sizeof(float));
    engine->forget(b.data(), b.size() * sizeof(float));
  }
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return {flops / best[0] / 1e9, flops / best[1] / 1e9};
}

Bf16Gemm::Choice probe_engines() {
  if (OnednnMatmul::runs_amx()) {
    return {Bf16Gemm::Kind::OneDnn, "AMX (no probe: its tiles outrun the fp32 units)"};
  }
  constexpr Index n = 1024;
  OnednnBf16Gemm onednn({});
  EmulatedBf16Gemm fp32({});
  const auto [onednn_rate, fp32_rate] = probe_gflops(onednn, fp32, n);
  if (onednn_rate >= fp32_rate) {
    return {Bf16Gemm::Kind::OneDnn,
            fmt::format("faster here than the fp32 units ({}^3: {:.0f} against {:.0f} GFLOP/s)", n,
                        onednn_rate, fp32_rate)};
  }
  return {
      Bf16Gemm::Kind::Emulated,
      fmt::format("faster here than oneDNN's bf16 kernels ({}^3: {:.0f} against {:.0f} GFLOP/s)", n,
                  fp32_rate, onednn_rate)};
}

}  // namespace

Bf16Gemm::Choice Bf16Gemm::choose_for_bf16(const std::string& pinned) {
  if (pinned == "onednn") return {Kind::OneDnn, "rank 0's choice (every rank runs one engine)"};
  if (pinned == "fp32") return {Kind::Emulated, "rank 0's choice (every rank runs one engine)"};
  CHIMERA_CHECK(pinned.empty(), "unknown bf16 GEMM engine '{}'", pinned);
  if (const char* env = std::getenv("CHIMERA_CPU_BF16_GEMM"); env != nullptr && *env != '\0') {
    const std::string_view name(env);
    if (name == "onednn") return {Kind::OneDnn, "CHIMERA_CPU_BF16_GEMM=onednn"};
    if (name == "fp32") return {Kind::Emulated, "CHIMERA_CPU_BF16_GEMM=fp32"};
    throw InputError(fmt::format(
        "CHIMERA_CPU_BF16_GEMM={}: unknown bf16 GEMM engine (onednn or fp32; unset: the faster "
        "of the two on this CPU)",
        name));
  }
  // Both engines must be able to run before the probe times them.
  if (const auto why = OnednnMatmul::unsupported(OperandType::Bf16)) throw InputError(*why);
  static const Choice probed = probe_engines();
  return probed;
}

std::unique_ptr<Bf16Gemm> Bf16Gemm::make(Kind kind, std::string bf16_note) {
  if (kind == Kind::Emulated) return std::make_unique<EmulatedBf16Gemm>(std::move(bf16_note));
  return std::make_unique<OnednnBf16Gemm>(std::move(bf16_note));
}

}  // namespace chimera::backend::cpu
