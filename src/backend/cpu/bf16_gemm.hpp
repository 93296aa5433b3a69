#pragma once
// GEMMs of the CPU backend at runtime.precision = bf16 or bf16-emulated: both operands rounded to
// bf16, products summed in fp32, C in fp32 (the CUDA backend's bf16 meaning). Two engines:
//  - OneDnn: oneDNN's matmul on bf16 operands (AMX or AVX-512-BF16 kernels).
//  - Emulated ("the fp32 units"): the operands rounded to bf16 values in fp32, then the fp32
//    GEMM. A product of two bf16 values (8 significant bits each) is exact in fp32, and an FMA
//    adds it with one rounding, as AVX-512-BF16's vdpbf16ps does; so the bits differ from
//    oneDNN's kernels only in the order of the fp32 sums and in subnormals (vdpbf16ps flushes
//    them to zero, the FMAs keep them). It gives the bf16 numerics on any CPU, and like the
//    fp32 GEMM its bits do not depend on the thread count.
// runtime.precision = bf16-emulated always takes the fp32 units; bf16 takes the faster engine on
// this CPU (choose_for_bf16): on a Xeon with AVX-512-BF16 but no AMX, oneDNN 2.6's bf16 matmul
// ran at half its fp32 rate (docs/model.md), so there the fp32 units are the fast bf16 engine.
//
// Weights are converted once per change, not on every GEMM: the model registers its weight
// buffers, the backend reports every write into them (copies, AdamW), and a GEMM operand that
// lies in a registered buffer is read from its converted copy while that copy is current.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "chimera/backend/backend.hpp"

namespace chimera::backend::cpu {

class Bf16Gemm {
 public:
  enum class Kind { OneDnn, Emulated };
  // The engine of runtime.precision = bf16, and why, e.g. "faster here than oneDNN's bf16
  // kernels (1024^3: 250 against 130 GFLOP/s)". CHIMERA_CPU_BF16_GEMM=onednn|fp32 chooses;
  // unset, both engines time a 1024^3 GEMM once per process and the faster one runs (AMX:
  // oneDNN without a probe). A timing can go either way where the two are close or the machine
  // is busy, and the engines' bits differ in the order of sums: the variable pins the engine for
  // runs that must repeat each other's bits. InputError for an unknown name, or when oneDNN's
  // bf16 cannot run here.
  struct Choice {
    Kind kind;
    std::string why;
  };
  // `pinned` ("onednn" or "fp32", e.g. the engine rank 0 chose) overrides the variable and the
  // probe.
  static Choice choose_for_bf16(const std::string& pinned = {});
  // Throws InputError (saying why) when Kind::OneDnn cannot run on this CPU. `bf16_note`: this
  // engine runs runtime.precision = bf16, for the reason given (empty: bf16-emulated, a test mode).
  static std::unique_ptr<Bf16Gemm> make(Kind kind, std::string bf16_note = {});
  virtual ~Bf16Gemm() = default;

  // C = alpha * op(A) op(B) + beta * C; on the OpenMP team when `team`, else on this thread.
  virtual void gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                    const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                    Index ldc, bool team) = 0;
  // "bf16 GEMMs on oneDNN 2.6.3 (avx512_core_amx)" or "bf16 GEMMs emulated (...)".
  virtual std::string description() const = 0;
  // Whether it multiplies bf16 bits (oneDNN): then gemm_bf16_a takes an A its caller converted
  // already, e.g. while the values were in cache, and used for two GEMMs.
  virtual bool multiplies_bf16_bits() const { return false; }
  // gemm() with A given as bf16 bits (stored as op(A)'s storage, row stride lda), on the team.
  virtual void gemm_bf16_a(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                           const Bf16Bits* a, Index lda, const float* b, Index ldb, float beta,
                           float* c, Index ldc);
  // gemm() with A already rounded to bf16 values (stored as op(A)'s storage, row stride lda), on
  // the team; for the fp32 units (multiplies_bf16_bits() false).
  virtual void gemm_rounded_a(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                              const float* a, Index lda, const float* b, Index ldb, float beta,
                              float* c, Index ldc);

  void register_weights(const float* data, Index n);
  // Every converted copy of registered weights that [dst, dst + bytes) overlaps becomes stale.
  void weights_written(const void* dst, std::size_t bytes);
  // [ptr, ptr + bytes) is freed: the registrations it overlaps end and their copies go. Its
  // memory may come back as anything, e.g. activations, which kernels write unannounced, so a
  // registration left behind would serve a stale copy of them.
  void forget(const void* ptr, std::size_t bytes);
  // How many weight conversions ran (a test sees the cache work).
  std::uint64_t weight_conversions() const { return weight_conversions_; }
  // Seconds spent converting operands outside parallel regions (Backend::conversion_seconds).
  double conversion_seconds() const { return conversion_seconds_; }

 protected:
  Bf16Gemm() = default;
  // The registered buffer that holds the whole stored matrix, as an index into ranges_ (-1: none).
  int weight_range(const float* src, Index rows, Index cols, Index ld) const;
  // Drops the converted copies of stored matrices that start in [begin, end); under mutex_.
  virtual void drop_copies(const std::byte* begin, const std::byte* end) = 0;

  struct Range {
    const std::byte* begin;
    const std::byte* end;
    std::uint64_t generation = 0;
    bool overlaps(const std::byte* from, const std::byte* to) const {
      return from < end && begin < to;
    }
  };
  std::vector<Range> ranges_;
  mutable std::mutex mutex_;  // guards ranges_ and the converted copies
  std::uint64_t weight_conversions_ = 0;
  double conversion_seconds_ = 0;  // written outside parallel regions only
};

}  // namespace chimera::backend::cpu
