#include "chimera/model/activations.hpp"

#include <algorithm>

namespace chimera::model {

namespace {

// Hands out consecutive regions of one allocation.
class Packer {
 public:
  std::size_t take_floats(Index count) { return take(static_cast<std::size_t>(count) * 4); }
  std::size_t take_ints(Index count) { return take(static_cast<std::size_t>(count) * 4); }
  std::size_t size() const { return size_; }

 private:
  std::size_t take(std::size_t bytes) {
    const std::size_t at = size_;
    size_ += bytes;
    return at;
  }
  std::size_t size_ = 0;
};

float* at(std::byte* base, std::size_t offset) {
  return reinterpret_cast<float*>(base + offset);
}

}  // namespace

ActivationLayout::ActivationLayout(const Dims& d, const StageShape& shape) : shape_(shape) {
  const Index N = d.N(), C = d.C;
  Packer p;
  input_ = p.take_floats(N * C);
  if (shape.first) tokens_ = p.take_ints(N);
  if (shape.last) targets_ = p.take_ints(N);
  if (shape.last) head_grad_ = p.take_floats(N * C);
  kept_bytes_ = p.size();

  blocks_ = p.size();
  Packer b;
  const Index sizes[13] = {N * C,     N,         N,     3 * N * C, d.B * d.H * d.T * d.T,
                           N * C,     N * C,     N * C, N,         N,
                           4 * N * C, 4 * N * C, N * C};
  for (int i = 0; i < 13; ++i) block_offsets_[i] = b.take_floats(sizes[i]);
  block_stride_ = b.size();
  for (int l = 0; l < shape.num_blocks; ++l) p.take_floats(static_cast<Index>(block_stride_ / 4));

  full_bytes_ = p.size();
}

BlockActivations ActivationLayout::block(std::byte* base, int local_block) const {
  std::byte* r = base + blocks_ + static_cast<std::size_t>(local_block) * block_stride_;
  const auto* o = block_offsets_;
  return {at(r, o[0]),  at(r, o[1]),  at(r, o[2]), at(r, o[3]), at(r, o[4]),
          at(r, o[5]),  at(r, o[6]),  at(r, o[7]), at(r, o[8]), at(r, o[9]),
          at(r, o[10]), at(r, o[11]), at(r, o[12])};
}

// Saved gradients: per block [dy | dfc (4) | dln_2 | dx2 | dqkv (3) | dln_1] in units of N*C
// (11 per block), then dembedding (first).
SavedGradLayout::SavedGradLayout(const Dims& d, const StageShape& shape)
    : NC_(d.N() * d.C), shape_(shape) {
  bytes_ = static_cast<std::size_t>(NC_) * 4 *
           static_cast<std::size_t>(11 * shape.num_blocks + (shape.first ? 1 : 0));
}

float* SavedGradLayout::dy(std::byte* base, int local_block) const {
  return reinterpret_cast<float*>(base) + 11 * NC_ * local_block;
}

BlockSavedGrads SavedGradLayout::block(std::byte* base, int local_block) const {
  float* r = dy(base, local_block);
  return {r + NC_, r + 5 * NC_, r + 6 * NC_, r + 7 * NC_, r + 10 * NC_};
}

float* SavedGradLayout::dembedding(std::byte* base) const {
  return reinterpret_cast<float*>(base) + 11 * NC_ * shape_.num_blocks;
}

std::size_t workspace_bytes(const Dims& d) {
  return static_cast<std::size_t>(13 * d.N() * d.C + d.B * d.H * d.T * d.T) * 4;
}

Workspace workspace_at(std::byte* base, const Dims& d) {
  const Index NC = d.N() * d.C;
  float* w = reinterpret_cast<float*>(base);
  return {w,
          w + NC,
          {w + 2 * NC, w + 6 * NC, w + 7 * NC, w + 8 * NC, w + 11 * NC},
          {w + 12 * NC, w + 13 * NC}};
}

Index head_chunk_rows(const Dims& d) {
  const Index N = d.N();
  const Index chunks = std::max<Index>(1, (N * d.Vp + kHeadChunkFloats - 1) / kHeadChunkFloats);
  const Index rows = (N + chunks - 1) / chunks;
  return std::min(N, (rows + 31) / 32 * 32);
}

std::size_t head_scratch_bytes(const Dims& d) {
  const Index N = d.N();
  return static_cast<std::size_t>(2 * N * d.C + 3 * N + head_chunk_rows(d) * d.Vp) * 4;
}

HeadScratch head_scratch_at(std::byte* base, const Dims& d) {
  const Index N = d.N(), NC = N * d.C;
  float* w = reinterpret_cast<float*>(base);
  return {w,
          w + NC,
          w + NC + N,
          w + NC + 2 * N,
          w + 2 * NC + 2 * N,
          w + 2 * NC + 3 * N,
          head_chunk_rows(d)};
}

std::size_t activation_bytes_formula(const Dims& d, const StageShape& s, bool recompute) {
  const Index N = d.N(), C = d.C, n = s.num_blocks;
  const Index first = s.first ? 1 : 0, last = s.last ? 1 : 0;
  const Index kept = N * C * (1 + last) + N * (first + last);
  if (recompute) return static_cast<std::size_t>(4 * kept);
  return static_cast<std::size_t>(4 * (kept + n * (16 * N * C + 4 * N + d.B * d.H * d.T * d.T)));
}

}  // namespace chimera::model
