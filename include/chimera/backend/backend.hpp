#pragma once
// The compute backend: device memory, copies, GEMM and the fused kernels GPT-2 needs, behind one
// small interface (docs/DESIGN.md §4). The CPU backend (src/backend/cpu/) is the oracle every
// other backend is tested against; a CUDA backend implements the same calls.
//
// Conventions for every call:
//  - Pointers are device memory of this backend (host memory for the CPU backend), except where a
//    parameter says "host". Matrices are row-major; `ld*` are row strides in elements.
//  - Kernels write their outputs completely unless they say "+=" (gradient accumulation).
//  - Results are deterministic: the same inputs give the same bits on every call. The CPU kernels
//    give the same bits for any thread count too (no reduction order depends on threads).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chimera/core/config.hpp"

namespace chimera::backend {

using Index = std::int64_t;

enum class Trans : bool { No = false, Yes = true };

// Scalars of one AdamW update, computed in double by the optim module from the step and the
// hyperparameters (so that every backend uses the same rounded values).
struct AdamWArgs {
  float decay_factor = 1;  // 1 - lr * weight_decay (1 for biases and LayerNorm)
  float step_size = 0;     // lr / (1 - beta1^t)
  float beta1 = 0.9F;      // first-moment decay
  float one_minus_beta1 = 0.1F;
  float beta2 = 0.95F;  // second-moment decay
  float one_minus_beta2 = 0.05F;
  float bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t)
  float eps = 1e-8F;                // added to sqrt(v_hat)
  float grad_scale = 1;             // multiplies every gradient first (global-norm clipping)
};

// How make_backend sets a backend up.
struct BackendOptions {
  // GEMM arithmetic (runtime.precision), on fp32 storage; every other kernel stays fp32:
  //  - "fp32" everywhere;
  //  - "bf16": operands rounded to bf16, fp32 accumulation (CUDA: tensor cores of Ampere or
  //    newer; CPU: oneDNN on AMX or AVX-512-BF16, refused on a CPU with neither);
  //  - "bf16-emulated" (CPU): the bf16 rounding of operands on the fp32 GEMM, for tests;
  //  - "tf32" (CUDA);
  //  - "auto": bf16 where the device has bf16 units, else fp32.
  std::string precision = "fp32";
  // CUDA: the rank's index among the ranks of its node; the device is local_rank % devices.
  // -1: from the launcher's environment (docs/cuda.md), 0 when it says nothing.
  int local_rank = -1;
  // CPU, runtime.precision = bf16, where two GEMM engines can run it (docs/precision.md):
  // "onednn" or "fp32" pins one; empty: CHIMERA_CPU_BF16_GEMM, else a timing probe. A job runs
  // rank 0's engine on every rank (src/runtime/run_compute.cpp), so its ranks compute alike.
  std::string cpu_bf16_engine;
};

// Dense peak arithmetic rate of the device at the backend's precision (for MFU figures).
struct PeakFlops {
  double flops_per_s = 0;
  std::string source;  // where the figure comes from, for the reader of a benchmark
};

// A group of ranks whose device buffers the backend sums with the device's own collectives
// (NCCL), on a stream of its own, while the backend's kernels go on.
class DeviceGroup {
 public:
  virtual ~DeviceGroup() = default;
  // Starts the in-place sum over the group of data[0..count), ordered after every call issued on
  // the backend so far. Sums of every group of one backend run one after another in start order,
  // so all ranks must start the sums they share in one consistent order. Returns a ticket.
  virtual std::uint64_t start_sum(float* data, std::size_t count) = 0;
  // A sharded optimizer's halves, on the same stream and tickets as start_sum. The buffer is cut
  // into the group's ranks' shards: shard i is data[bounds[i], bounds[i + 1]) (bounds has size + 1
  // entries, the same on every rank; shards may differ in size or be empty).
  // Starts the in-place sum over the group of shard `rank` of data; the other shards are left
  // undefined.
  virtual std::uint64_t start_reduce_scatter(float* data,
                                             const std::vector<std::size_t>& bounds) = 0;
  // Starts the in-place all-gather: every rank's shard of data is copied to the others.
  virtual std::uint64_t start_all_gather(float* data, const std::vector<std::size_t>& bounds) = 0;
  // True once the collective of `ticket` has completed (never blocks).
  virtual bool finished(std::uint64_t ticket) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // One line for logs and benchmarks, e.g. "cpu: BLIS 0.9.0 (skx kernels), 2 OpenMP threads".
  virtual std::string description() const = 0;
  // The arithmetic of its GEMMs, runtime.precision with "auto" resolved: "fp32", "tf32", "bf16"
  // or "bf16-emulated" (a benchmark names the GEMM rate it prints with it).
  virtual std::string gemm_precision() const { return "fp32"; }
  // Where the GEMMs at a bf16 precision run, when a backend has two ways: "oneDNN" or "fp32
  // units" (operands rounded to bf16, then the fp32 GEMM) on the CPU; empty where it has one.
  virtual std::string gemm_engine() const { return {}; }

  // --- memory (bytes; allocations are aligned to at least 64 bytes) -------------------------
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  virtual void copy_from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  // Waits until every call issued so far has finished (a no-op on the CPU).
  virtual void synchronize() = 0;

  // --- GEMM: C = alpha * op(A) * op(B) + beta * C, op(A) is m x k, op(B) is k x n -----------
  // beta = 0 overwrites C without reading it.
  virtual void gemm(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                    const float* a, Index lda, const float* b, Index ldb, float beta, float* c,
                    Index ldc) = 0;
  // `batch` independent GEMMs; matrix i starts at a + i*stride_a (likewise b and c).
  virtual void gemm_strided_batched(Trans trans_a, Trans trans_b, Index m, Index n, Index k,
                                    float alpha, const float* a, Index lda, Index stride_a,
                                    const float* b, Index ldb, Index stride_b, float beta, float* c,
                                    Index ldc, Index stride_c, Index batch) = 0;

  // --- elementwise and row kernels ------------------------------------------------------
  // dst[i] += src[i]
  virtual void accumulate(float* dst, const float* src, Index n) = 0;
  // For two row-major [rows, C] tables: dst[r, :] += src[r, :], then src[r, :] = 0, for every r.
  // touched[0..count) lists (without repeats) the rows of src that may be nonzero; every other
  // row of src must be zero, so that only the listed rows need visiting. The default visits all.
  virtual void move_rows(float* dst, float* src, Index rows, Index C, const std::int32_t* touched,
                         Index count);
  // out[r, :] = residual[r, :] + bias   (residual may be null: out[r, :] = bias); N rows of C.
  virtual void broadcast_bias(float* out, const float* residual, const float* bias, Index N,
                              Index C) = 0;
  // dbias += sum over the N rows of dout[r, :]
  virtual void bias_backward(float* dbias, const float* dout, Index N, Index C) = 0;

  // --- GPT-2 layers ---------------------------------------------------------------------
  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. Tokens must lie in the table (the caller
  // checks them on the host).
  virtual void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                 const float* wpe, Index B, Index T, Index C) = 0;
  // dwte[tokens[b, t], :] += dout[b, t, :];  dwpe[t, :] += sum_b dout[b, t, :]
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const std::int32_t* tokens, Index B, Index T, Index C) = 0;

  // LayerNorm over rows of C (eps 1e-5): out = (inp - mean) * rstd * weight + bias. Stores the
  // row mean and 1/std for the backward.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, Index N, Index C) = 0;
  // dinp = dresidual + d(LayerNorm)/d(inp)^T dout. dresidual may be null (taken as 0) and may
  // alias dinp.
  virtual void layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                        const float* inp, const float* weight, const float* mean,
                                        const float* rstd, Index N, Index C) = 0;
  // dweight += sum_r dout * normalized(inp);  dbias += sum_r dout
  virtual void layernorm_backward_params(float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* mean, const float* rstd,
                                         Index N, Index C) = 0;

  // GELU, tanh approximation (GPT-2's "gelu_new").
  virtual void gelu_forward(float* out, const float* inp, Index n) = 0;
  // dinp = gelu'(inp) * dout; dinp may alias dout.
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, Index n) = 0;

  // Causal multi-head self-attention of B sequences: qkv [B, T, 3C] holds q | k | v, head h in
  // columns h*hs..(h+1)*hs of each (hs = C / H). att [B, H, T, T] = softmax(q k^T / sqrt(hs))
  // with the causal mask (0 above the diagonal); out [B, T, C] = att v, head h in its columns.
  virtual void attention_forward(float* out, float* att, const float* qkv, Index B, Index T,
                                 Index C, Index H) = 0;
  // dqkv [B, T, 3C] from dout [B, T, C], qkv and att of the forward; datt is scratch of
  // B*H*T*T floats.
  virtual void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                                  const float* att, Index B, Index T, Index C, Index H) = 0;
  // The share of the T x T score products the attention kernels compute: 1 where they compute
  // the whole square and mask it, less where they skip masked blocks. FLOP counts use it
  // (chimera bench model), so that a rate never includes work that did not run.
  virtual double attention_products_share(Index /*T*/) const { return 1.0; }
  // Fused softmax + cross-entropy over N rows of V logits with row stride ld >= V (columns V..ld
  // are padding and are neither read nor written). In place: logits become probabilities;
  // losses[r] = -log p[r, targets[r]].
  virtual void softmax_cross_entropy_forward(float* logits, float* losses,
                                             const std::int32_t* targets, Index N, Index V,
                                             Index ld) = 0;
  // In place: probabilities become p - onehot(target), the gradient of the loss sum per row
  // (the caller folds 1/N and the loss scale into the GEMMs that read it).
  virtual void softmax_cross_entropy_backward(float* probs, const std::int32_t* targets, Index N,
                                              Index ld) = 0;
  // In place: each of N rows of V values (row stride ld) becomes its softmax (generation's
  // attention over cached keys). The default runs softmax_cross_entropy_forward with target 0
  // and discards the losses, which gives the same values.
  virtual void softmax_rows(float* x, Index N, Index V, Index ld);
  // The LM head and its cross-entropy, fused and chunked: never more than `chunk_rows` rows of
  // logits exist. For rows r of x [N, C] and the tied table wte [V, C] (row stride C):
  //   losses[r] = -log softmax(x[r] wte^T)[targets[r]];
  // and when grad_scale != 0, the gradient of grad_scale * sum_r losses[r]:
  //   dx [N, C] = grad_scale (p - onehot) wte           (overwritten)
  //   dwte [V, C] += grad_scale (p - onehot)^T x        (rows V.. are not touched)
  // `logits` is scratch of chunk_rows x ld floats (ld >= V). Chunks follow N and chunk_rows only,
  // so results do not depend on anything else. The default runs gemm and the softmax kernels
  // above chunk by chunk; a backend may fuse them.
  virtual void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                     const float* wte, const std::int32_t* targets, Index N,
                                     Index C, Index V, float grad_scale, float* logits, Index ld,
                                     Index chunk_rows);

  // --- optimizer ------------------------------------------------------------------------
  // AdamW as torch.optim.AdamW (decoupled decay) on n parameters, g = grads * grad_scale:
  //   p *= decay_factor; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
  //   p -= step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, Index n,
                            const AdamWArgs& args) = 0;
  // sum_i x[i]^2 accumulated in double.
  virtual double sum_of_squares(const float* x, Index n) = 0;

  // --- weights --------------------------------------------------------------------------
  // data[0..n) holds weights, which the caller changes only through this backend's calls
  // (copy_from_host, copy, fill_zero, accumulate, adamw_update). A backend may then keep GEMM
  // operands converted from them (bf16) until one of those calls writes there. The registration
  // ends when the memory holding data is deallocated.
  virtual void register_weights(const float* /*data*/, Index /*n*/) {}
  // [dst, dst + bytes) is being written other than through this backend's calls (an MPI
  // all-gather into the weights): what was kept converted from it must not be used again.
  virtual void weights_written_outside(const void* /*dst*/, std::size_t /*bytes*/) {}
  // Seconds this backend has spent converting GEMM operands (to bf16) outside parallel regions,
  // for profiles; 0 where it converts none or does not count.
  virtual double conversion_seconds() const { return 0.0; }

  // --- placement, for the runtime (defaults describe a host-memory backend) ---------------
  // True when backend memory is host memory that MPI can read and write directly.
  virtual bool host_memory() const { return true; }
  // Host memory for staging copies to and from backend memory (page-locked on a GPU, so that
  // copies run at full speed).
  virtual void* allocate_host(std::size_t bytes) { return allocate(bytes); }
  virtual void deallocate_host(void* ptr) noexcept { deallocate(ptr); }
  // Identifies the device this rank computes on within its node ("" for host memory): ranks of
  // one node with equal ids share a device, which device collectives do not allow.
  virtual std::string device_id() const { return {}; }
  // Device collectives: rank 0 of a group makes an id (opaque bytes), every member receives it
  // (over MPI) and joins the group of `size` ranks as `rank`; collective over the group. An empty
  // id, and has_device_groups() false, mean this backend has none (gradients are summed
  // through MPI).
  virtual bool has_device_groups() const { return false; }
  virtual std::string new_device_group_id() { return {}; }
  virtual std::unique_ptr<DeviceGroup> join_device_group(const std::string& id, int size, int rank);
  // The device's dense peak at this backend's precision; nullopt when unknown (the CPU).
  virtual std::optional<PeakFlops> peak_flops() const { return std::nullopt; }
};

// The backends of this build: "cpu", and "cuda" when it was built with CUDA.
std::vector<std::string> available_backends();

// The backend of runtime.backend. One this build lacks, or a precision the backend does not have,
// is an InputError that names the choices.
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options = {});

}  // namespace chimera::backend
