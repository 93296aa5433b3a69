#pragma once
// Memory of one (stage, micro-batch) between its forward and its backward, as byte layouts over
// one allocation each, and the closed-form sizes they must match (docs/model.md). N = B*T tokens,
// n = blocks of the stage, first/last = 1 when the stage holds the embedding/head, else 0.
//
//   activations  4 [ N C (1 + last) + N (first + last) + n (16 N C + 4 N + B H T^2) ]
//   recompute    4 [ N C (1 + last) + N (first + last) ]  (stage input, tokens, targets, and the
//                                                         head's input gradient)
//   saved grads  4 N C (11 n + first)                   (split backward: backward_input to _weight)
//   workspace    4 (13 N C + B H T^2)                   (per worker: one block's gradients +
//   scratch) head scratch 4 (2 N C + 3 N + R Vp)                 (per worker holding the last
//   stage; R rows
//                                                         of logits at a time, head_chunk_rows)
//
// The head computes its loss and its gradients in the forward (block.hpp), so a micro-batch keeps
// no logits: only the gradient of the stage output, N C floats.
#include <cstddef>
#include <cstdint>

#include "chimera/model/block.hpp"
#include "chimera/model/layers.hpp"

namespace chimera::model {

struct StageShape {
  int num_blocks = 0;
  bool first = false;  // holds the embedding (stage 0)
  bool last = false;   // holds the final LayerNorm and the head (stage S-1)
};

// Everything a stage's forward stores. The part that recomputation keeps (the stage input, the
// tokens of stage 0 and the targets of the last stage) comes first, so it is a prefix.
class ActivationLayout {
 public:
  ActivationLayout(const Dims& dims, const StageShape& shape);

  std::size_t kept_bytes() const { return kept_bytes_; }
  std::size_t full_bytes() const { return full_bytes_; }

  float* input(std::byte* base) const { return floats(base, input_); }  // [N, C]
  std::int32_t* tokens(std::byte* base) const { return ints(base, tokens_); }
  std::int32_t* targets(std::byte* base) const { return ints(base, targets_); }
  // Last stage: the gradient of the loss with respect to the stage's last block output [N, C],
  // computed by the forward (kept with recompute too).
  float* head_grad(std::byte* base) const { return floats(base, head_grad_); }
  BlockActivations block(std::byte* base, int local_block) const;
  // Output of the stage's last block.
  float* output(std::byte* base) const { return block(base, shape_.num_blocks - 1).out; }

 private:
  static float* floats(std::byte* base, std::size_t at) {
    return reinterpret_cast<float*>(base + at);
  }
  static std::int32_t* ints(std::byte* base, std::size_t at) {
    return reinterpret_cast<std::int32_t*>(base + at);
  }

  StageShape shape_;
  std::size_t input_ = 0, tokens_ = 0, targets_ = 0, head_grad_ = 0;
  std::size_t blocks_ = 0, block_stride_ = 0;
  std::size_t kept_bytes_ = 0, full_bytes_ = 0;
  // Offsets inside one block's record.
  std::size_t block_offsets_[13] = {};
};

// Gradients kept from backward_input to backward_weight (split backward).
class SavedGradLayout {
 public:
  SavedGradLayout(const Dims& dims, const StageShape& shape);
  std::size_t bytes() const { return bytes_; }
  float* dy(std::byte* base, int local_block) const;  // gradient of the block output [N, C]
  BlockSavedGrads block(std::byte* base, int local_block) const;
  float* dembedding(std::byte* base) const;  // first stage: gradient of the embedding output
 private:
  Index NC_ = 0;
  StageShape shape_;
  std::size_t bytes_ = 0;
};

// Per-worker scratch of the backward: ping-pong gradient buffers, one block's saved gradients
// (reused block after block by the fused backward), and the input pass's scratch.
struct Workspace {
  float* grad_a;  // [N, C]
  float* grad_b;  // [N, C]
  BlockSavedGrads block;
  BackwardScratch scratch;
};
std::size_t workspace_bytes(const Dims& dims);
Workspace workspace_at(std::byte* base, const Dims& dims);

// Rows of logits the head computes at a time: at most kHeadChunkFloats logits (64 MiB), in equal
// chunks rounded up to 32 rows, all N rows when they fit.
inline constexpr Index kHeadChunkFloats = Index{1} << 24;
Index head_chunk_rows(const Dims& dims);
// The head's scratch (block.hpp) on a worker holding the last stage.
std::size_t head_scratch_bytes(const Dims& dims);
HeadScratch head_scratch_at(std::byte* base, const Dims& dims);

// The closed form of the activations above, from the sizes alone (the layout builds the same
// total piece by piece; tests and `chimera bench model` check they agree).
std::size_t activation_bytes_formula(const Dims& dims, const StageShape& shape, bool recompute);

}  // namespace chimera::model
