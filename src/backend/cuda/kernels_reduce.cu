// Reductions over many rows, in two passes with a fixed order and no atomics: column sums (bias
// and LayerNorm parameter gradients) through per-chunk partial sums, and the sum of squares of a
// buffer (gradient clipping) in double through per-block partial sums.
#include "cuda_check.hpp"
#include "device_utils.cuh"
#include "kernels.hpp"

namespace chimera::backend::cuda {

namespace {

// Column sums: a block owns 32 columns of one chunk of rows; its 8 row lanes take every 8th row
// of the chunk, then add their partial sums in lane order.
constexpr int kTileColumns = 32;
constexpr int kRowLanes = 8;
constexpr Index kRowsPerChunk = 256;

Index chunks_for(Index N) {
  return (N + kRowsPerChunk - 1) / kRowsPerChunk;
}

// Term(r, c, acc) adds row r's terms of column c to acc[0..K).
template <int K, typename Term>
__global__ void column_partials_kernel(float* partial, Index N, Index C, Term term) {
  __shared__ float lanes[K][kRowLanes][kTileColumns];
  const Index c = static_cast<Index>(blockIdx.x) * kTileColumns + threadIdx.x;
  const Index chunk = blockIdx.y;
  const Index end = min(N, (chunk + 1) * kRowsPerChunk);
  float acc[K] = {};
  if (c < C) {
    for (Index r = chunk * kRowsPerChunk + threadIdx.y; r < end; r += kRowLanes) term(r, c, acc);
  }
  for (int k = 0; k < K; ++k) lanes[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  const Index chunks = gridDim.y;
  for (int k = 0; k < K; ++k) {
    float total = 0.0F;
    for (int lane = 0; lane < kRowLanes; ++lane) total += lanes[k][lane][threadIdx.x];
    partial[(k * chunks + chunk) * C + c] = total;
  }
}

// out_k[c] += sum over chunks, in chunk order.
template <int K>
__global__ void column_totals_kernel(float* out0, float* out1, const float* partial, Index chunks,
                                     Index C) {
  const Index c = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float* outs[2] = {out0, out1};
  for (int k = 0; k < K; ++k) {
    float total = 0.0F;
    for (Index j = 0; j < chunks; ++j) total += partial[(k * chunks + j) * C + c];
    outs[k][c] += total;
  }
}

struct BiasTerm {
  const float* dout;
  Index C;
  __device__ void operator()(Index r, Index c, float* acc) const { acc[0] += dout[r * C + c]; }
};

struct LayerNormParamsTerm {
  const float* dout;
  const float* inp;
  const float* mean;
  const float* rstd;
  Index C;
  __device__ void operator()(Index r, Index c, float* acc) const {
    const float dy = dout[r * C + c];
    acc[0] += dy * ((inp[r * C + c] - mean[r]) * rstd[r]);
    acc[1] += dy;
  }
};

template <int K, typename Term>
void column_sums(cudaStream_t stream, float* out0, float* out1, Index N, Index C, Term term,
                 float* scratch) {
  if (N == 0 || C == 0) return;
  const Index chunks = chunks_for(N);
  const dim3 grid(static_cast<unsigned>((C + kTileColumns - 1) / kTileColumns),
                  static_cast<unsigned>(chunks));
  column_partials_kernel<K>
      <<<grid, dim3(kTileColumns, kRowLanes), 0, stream>>>(scratch, N, C, term);
  CUDA_CHECK_LAUNCH();
  column_totals_kernel<K>
      <<<static_cast<unsigned>((C + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          out0, out1, scratch, chunks, C);
  CUDA_CHECK_LAUNCH();
}

// Sum of squares: a fixed grid, so that which block adds which element depends on n alone.
constexpr int kSquaresBlocks = 512;

__global__ void squares_partials_kernel(double* partial, const float* x, Index n) {
  __shared__ double shared[kWarp];
  double acc = 0.0;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += v * v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void squares_total_kernel(double* result, const double* partial) {
  __shared__ double shared[kWarp];
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < kSquaresBlocks;
       i += static_cast<int>(blockDim.x)) {
    acc += partial[i];
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) *result = acc;
}

}  // namespace

std::size_t column_sum_scratch_floats(Index N, Index C) {
  return static_cast<std::size_t>(2 * chunks_for(N) * C);  // room for two outputs
}

void launch_bias_backward(cudaStream_t stream, float* dbias, const float* dout, Index N, Index C,
                          float* scratch) {
  column_sums<1>(stream, dbias, nullptr, N, C, BiasTerm{dout, C}, scratch);
}

void launch_layernorm_backward_params(cudaStream_t stream, float* dweight, float* dbias,
                                      const float* dout, const float* inp, const float* mean,
                                      const float* rstd, Index N, Index C, float* scratch) {
  column_sums<2>(stream, dweight, dbias, N, C, LayerNormParamsTerm{dout, inp, mean, rstd, C},
                 scratch);
}

std::size_t sum_of_squares_scratch_doubles() {
  return kSquaresBlocks;
}

void launch_sum_of_squares(cudaStream_t stream, double* result, const float* x, Index n,
                           double* scratch) {
  squares_partials_kernel<<<kSquaresBlocks, kThreads, 0, stream>>>(scratch, x, n);
  CUDA_CHECK_LAUNCH();
  squares_total_kernel<<<1, kThreads, 0, stream>>>(result, scratch);
  CUDA_CHECK_LAUNCH();
}

}  // namespace chimera::backend::cuda
