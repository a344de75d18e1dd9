// The fused statistics kernels: every tensor of a frame in one launch through
// the table of frame_scan.cuh, a CUB block reduction per block, then one small
// launch that combines each tensor's blocks. Two launches rather than atomics
// or a last-block-done counter: no memset before the launch, no ordering
// subtleties, and the combine order is fixed, so results are reproducible.
#include <cub/block/block_reduce.cuh>

#include "stats_kernels.h"

namespace ovf::cuda {
namespace {

// P: Partial, or CastPartial for a frame that counts cast losses (cast_tally.cuh).
template <typename P>
using BlockReduce = cub::BlockReduce<P, kThreads>;

template <typename P>
__global__ void __launch_bounds__(kThreads)
    scan_blocks(const TensorEntry* __restrict__ table, uint32_t tensors,
                P* __restrict__ block_partials) {
  __shared__ uint32_t tensor;
  __shared__ typename BlockReduce<P>::TempStorage temp;
  if (threadIdx.x == 0) tensor = find_tensor(table, tensors, blockIdx.x);
  __syncthreads();
  const TensorEntry& t = table[tensor];
  const P mine = thread_scan<P>(t, blockIdx.x - t.first_block, threadIdx.x, kThreads);
  const P total = BlockReduce<P>(temp).Reduce(mine, Combine{});
  if (threadIdx.x == 0) block_partials[blockIdx.x] = total;
}

template <typename P>
__global__ void __launch_bounds__(kThreads)
    combine_blocks(const TensorEntry* __restrict__ table, const P* __restrict__ block_partials,
                   P* __restrict__ results) {
  __shared__ typename BlockReduce<P>::TempStorage temp;
  const TensorEntry& t = table[blockIdx.x];
  P mine = identity_of<P>();
  for (uint32_t b = threadIdx.x; b < t.blocks; b += kThreads) {
    mine = combine(mine, block_partials[t.first_block + b]);
  }
  const P total = BlockReduce<P>(temp).Reduce(mine, Combine{});
  if (threadIdx.x == 0) results[blockIdx.x] = total;
}

template <typename P>
cudaError_t launch(const TensorEntry* table, uint32_t tensors, uint32_t total_blocks,
                   P* block_partials, P* results, cudaStream_t stream) {
  if (tensors == 0) return cudaSuccess;
  if (total_blocks > 0) {  // a frame of empty tensors has nothing to scan
    scan_blocks<P><<<total_blocks, kThreads, 0, stream>>>(table, tensors, block_partials);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  combine_blocks<P><<<tensors, kThreads, 0, stream>>>(table, block_partials, results);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_frame_stats(const TensorEntry* table, uint32_t tensors, uint32_t total_blocks,
                               Partial* block_partials, Partial* results, cudaStream_t stream) {
  return launch(table, tensors, total_blocks, block_partials, results, stream);
}

cudaError_t launch_frame_stats(const TensorEntry* table, uint32_t tensors, uint32_t total_blocks,
                               CastPartial* block_partials, CastPartial* results,
                               cudaStream_t stream) {
  return launch(table, tensors, total_blocks, block_partials, results, stream);
}

}  // namespace ovf::cuda
