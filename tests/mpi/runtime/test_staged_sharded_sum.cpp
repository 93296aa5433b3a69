// The sharded optimizer's sum for GPU memory without NCCL (StagedShardedSum: the gradient staged
// through a host buffer, the CPU's ring there, the shard back; the updated shard down, the
// all-gather on the host, the other shards back up). Its only access to backend memory is the
// backend's copies, so it runs over the CPU backend here, and over the CUDA backend where every
// rank has a GPU (else that case skips). Exact sums of small integers at buffer sizes whose shards
// are unequal or empty, messages cut into pieces, two iterations on one sum.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "chimera/backend/backend.hpp"
#include "chimera/backend/buffer.hpp"
#include "chimera/core/error.hpp"
#include "mpi_world.hpp"
#include "staged_sharded_sum.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

using testing::world_rank;
using testing::world_size;

float value(int rank, std::size_t i, int iteration) {
  return static_cast<float>((rank * 7 + static_cast<int>(i) * 3 + iteration) % 11);
}

float sum_over_ranks(std::size_t i, int iteration) {
  float want = 0.0F;
  for (int r = 0; r < world_size(); ++r) want += value(r, i, iteration);
  return want;
}

std::vector<float> read(backend::Backend& be, const float* data, std::size_t count) {
  std::vector<float> host(count);
  be.copy_to_host(host.data(), data, count * sizeof(float));
  return host;
}

void check_staged_sums(backend::Backend& be) {
  const int rank = world_rank();
  for (const std::size_t count : {1UL, 5UL, 10UL, 37UL, 1000UL}) {
    for (const std::size_t piece : {1UL, 3UL, comm::ShardRing::kPieceFloats}) {
      const std::string what = "count " + std::to_string(count) + " piece " + std::to_string(piece);
      backend::DeviceBuffer grads(be, count * sizeof(float)), weights(be, count * sizeof(float));
      StagedShardedSum sum(be, comm::GradBuffer{"test", 0, grads.f32(), count}, MPI_COMM_WORLD,
                           weights.f32(), piece);
      const comm::ShardLayout& shard = sum.layout();
      for (int iteration = 0; iteration < 2; ++iteration) {  // a sum is reused every step
        std::vector<float> local(count), stale(count, -1.0F);
        for (std::size_t i = 0; i < count; ++i) local[i] = value(rank, i, iteration);
        be.copy_from_host(grads.f32(), local.data(), count * sizeof(float));
        be.copy_from_host(weights.f32(), stale.data(), count * sizeof(float));
        sum.start();
        sum.finish([&] { sum.test(); }, comm::WaitPolicy{}, {});
        // The shard holds the sum; the rest of the gradient is the rank's own (only the shard
        // came back from the host).
        const auto summed = read(be, grads.f32(), count);
        bool exact = true, untouched = true;
        for (std::size_t i = 0; i < count; ++i) {
          if (i >= shard.begin() && i < shard.end()) {
            exact = exact && summed[i] == sum_over_ranks(i, iteration);
          } else {
            untouched = untouched && summed[i] == local[i];
          }
        }
        EXPECT_TRUE(exact) << what;
        EXPECT_TRUE(untouched) << what;
        // The "optimizer step": this rank's shard of the weights becomes the summed gradient.
        be.copy(weights.f32() + shard.begin(), grads.f32() + shard.begin(),
                shard.size() * sizeof(float));
        sum.start_gather();
        sum.finish_gather([&] { sum.test_gather(); }, comm::WaitPolicy{}, {});
        const auto whole = read(be, weights.f32(), count);
        bool gathered = true;
        for (std::size_t i = 0; i < count; ++i)
          gathered = gathered && whole[i] == sum_over_ranks(i, iteration);
        EXPECT_TRUE(gathered) << what;
      }
    }
  }
}

TEST(StagedShardedSum, OverTheCpuBackendGivesExactShardsAndWholeWeights) {
  const auto cpu = backend::make_backend(BackendKind::Cpu);
  check_staged_sums(*cpu);
}

TEST(StagedShardedSum, OverTheCudaBackendGivesExactShardsAndWholeWeights) {
  std::unique_ptr<backend::Backend> gpu;
  std::string why;
  try {
    gpu = backend::make_backend(BackendKind::Cuda);
  } catch (const InputError& e) {
    why = e.what();
  }
  int have = gpu ? 1 : 0;  // agreed, so that every rank takes the same branch
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (have == 0) GTEST_SKIP() << "no usable GPU on every rank: " << why;
  check_staged_sums(*gpu);
}

}  // namespace
}  // namespace chimera::runtime
