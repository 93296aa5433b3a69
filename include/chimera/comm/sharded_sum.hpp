#pragma once
// The sharded optimizer's sums (ZeRO stage 1, Megatron's distributed optimizer): a stage's flat
// buffer is split into as many contiguous shards as the stage has holders, in the order of their
// ranks in the stage's communicator. The gradient sum is a reduce-scatter that leaves each rank
// the summed gradient of its own shard only; the optimizer updates that shard of the weights and
// of its (shard-sized) moments; an in-place all-gather then returns the full weights to every
// holder, awaited before the stage's next forward (the lowered program's WaitGather).
#include <mpi.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "chimera/comm/stage_sum.hpp"

namespace chimera::comm {

// Shard i of a buffer of `count` floats over `parts` holders: [i·block, (i+1)·block) clipped to
// the buffer, block = ceil(count / parts). The blocks are equal but the last ones may be short
// or empty, so the v-variants of the collectives need no padding of the buffers.
class ShardLayout {
 public:
  ShardLayout(std::size_t count, int parts, int index);
  static ShardLayout of(std::size_t count, MPI_Comm comm);  // this rank's shard over `comm`

  std::size_t begin() const { return begin_of(index_); }
  std::size_t end() const { return begin_of(index_ + 1); }
  std::size_t size() const { return end() - begin(); }
  int parts() const { return parts_; }
  std::size_t total() const { return count_; }
  std::size_t begin_of(int part) const;
  std::vector<int> counts() const;  // every shard's size, for MPI
  std::vector<int> displacements() const;

 private:
  std::size_t count_;
  int parts_;
  int index_;
  std::size_t block_;
};

// The ring of a sharded sum, on a host buffer given to each call: a reduce-scatter that leaves
// this rank's shard of the buffer ([layout().begin(), layout().end()) of it) holding the sum over
// `comm` and the rest partial sums, and an in-place all-gather of the shards. Both the CPU's
// ShardedSum (on the gradient itself) and a GPU's host-staged sum (on a page-locked copy) run it.
//
// The reduce-scatter is a ring of non-blocking messages on the communicator (P - 1 steps: send
// one shard's partial sum to the next rank, add the previous rank's into the buffer; each step in
// pieces of at most `piece_floats`), advanced by each test, rather than MPI_Ireduce_scatter: Open
// MPI's (libnbc) reduces the whole buffer to one rank and scatters it, with buffer-sized
// temporaries, more memory than the sharded moments save; the ring needs one piece.
class ShardRing {
 public:
  static constexpr std::size_t kPieceFloats = std::size_t{1} << 18;  // 1 MiB per message

  // A ring for buffers of `count` floats; `name` labels errors.
  ShardRing(const std::string& name, std::size_t count, MPI_Comm comm,
            std::size_t piece_floats = kPieceFloats);

  const ShardLayout& layout() const { return layout_; }
  MPI_Comm comm() const { return comm_; }

  void start_sum(float* data);     // the reduce-scatter of data[0, count)
  bool test_sum();                 // advances it; true once the shard holds the sum
  void start_gather(float* data);  // the all-gather of every rank's shard of data[0, count)
  bool test_gather();              // true once data is whole

 private:
  // The ring's step and piece: the shard sent and the one received and added, and the piece
  // [offset, offset + count) of a shard that a message of this piece carries.
  void post_step();
  int send_part() const;
  int recv_part() const;
  std::pair<std::size_t, int> piece(int part) const;

  MPI_Comm comm_;
  ShardLayout layout_;
  std::vector<int> counts_, displacements_;
  float* data_ = nullptr;  // the buffer of the sum in flight
  int rank_ = 0;
  std::vector<float> incoming_;  // one piece, received from the previous rank
  int step_ = 0;                 // of the ring, 0 .. parts - 2
  int piece_ = 0;                // of the step, 0 .. pieces_ - 1
  std::size_t piece_floats_;
  int pieces_ = 1;  // per step: the largest shard's, the same on every rank
  MPI_Request ring_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
  MPI_Request gather_ = MPI_REQUEST_NULL;
};

// Reduce-scatter of a gradient buffer in host memory over `comm` (ShardRing): once arrived, the
// rank's shard of the buffer holds the sum, the rest partial sums. Then, after the optimizer
// step, an in-place all-gather of `weights` (the buffer's full parameters).
class ShardedSum final : public StageSum {
 public:
  static constexpr std::size_t kPieceFloats = ShardRing::kPieceFloats;

  // `piece_floats`: the most floats a message of the ring carries (tests make it small).
  ShardedSum(GradBuffer buffer, MPI_Comm comm, float* weights,
             std::size_t piece_floats = kPieceFloats);

  const ShardLayout& layout() const { return ring_.layout(); }

 private:
  void begin() override { ring_.start_sum(buffer().data); }
  bool arrived() override { return ring_.test_sum(); }
  bool gathers() const override { return true; }
  void begin_gather() override { ring_.start_gather(weights_); }
  bool gather_arrived() override { return ring_.test_gather(); }
  std::string participants() const override;
  std::string silent_participants() const override;

  ShardRing ring_;
  float* weights_;
};

}  // namespace chimera::comm
