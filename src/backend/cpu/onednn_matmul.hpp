#pragma once
// Row-major GEMMs through oneDNN's matmul primitive, with operands of one data type (bf16 on the
// CPU's matrix units; f32 where a test checks the plumbing on any CPU) and an fp32 result with
// fp32 accumulation. oneDNN picks its kernel (AMX, AVX-512-BF16, ...) from the CPU.
//
// Primitives are created once per GEMM shape and reused across calls and steps; each thread
// executes on its own stream with its own scratchpad, so calls from an OpenMP region (one per
// attention head) run concurrently, each on one thread.
//
// oneDNN plans a primitive's work for the threads it may use when the primitive is created, and
// its order of the sums over k can follow that plan (and the shape). Primitives planned for one
// thread give results that depend on the GEMM's shape only, whatever OMP_NUM_THREADS is.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "chimera/backend/backend.hpp"

namespace chimera::backend::cpu {

enum class OperandType { F32, Bf16 };

// Who applies alpha and beta: oneDNN's output scale and sum post-op where its kernel takes them
// (else, silently, our own pass over C), or always our own pass (for tests of that fallback).
enum class Epilogue { OneDnnWhereSupported, Ours };

// Which threads a call runs on: the OpenMP team (or the calling thread inside a parallel region),
// or always the calling thread alone, with primitives planned for one thread.
enum class Threads { Team, Caller };

class OnednnMatmul {
 public:
  explicit OnednnMatmul(OperandType operands, Epilogue epilogue = Epilogue::OneDnnWhereSupported,
                        Threads threads = Threads::Team);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // C = alpha * op(A) op(B) + beta * C with beta 0 or 1; A and B hold elements of the operand
  // type. Runs on the threads chosen at construction.
  void run(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha, const void* a,
           Index lda, const void* b, Index ldb, float beta, float* c, Index ldc);

  // Whether oneDNN's kernels here use AVX-512 (or AMX): where its fp32 GEMMs outrun BLIS's.
  static bool runs_avx512();
  // Whether its kernels use AMX (bf16 tiles).
  static bool runs_amx();
  // Why oneDNN cannot run GEMMs with `operands` on this CPU, or nullopt when it can.
  static std::optional<std::string> unsupported(OperandType operands);
  // "oneDNN 2.6.3 (avx512_core_amx)": the version and the ISA its kernels use here.
  static std::string description();

 private:
  struct Primitive;
  using Key = std::tuple<bool, bool, Index, Index, Index, Index, Index, Index, std::uint32_t, bool>;
  const Primitive& primitive(const Key& key);

  OperandType operands_;
  bool own_epilogue_;
  bool one_thread_;
  std::mutex mutex_;  // guards primitives_ (entries are never removed, so references stay valid)
  std::map<Key, std::unique_ptr<Primitive>> primitives_;
};

}  // namespace chimera::backend::cpu
