// The two kernels of one frame's statistics, as one call that enqueues them.
// Host-callable, no torch: the table and the partial arrays live in device
// memory owned by the caller (frame_stats.h owns them in practice).
#ifndef OVF_CUDA_STATS_KERNELS_H
#define OVF_CUDA_STATS_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstdint>

#include "frame_scan.cuh"

namespace ovf::cuda {

// Enqueues on `stream`: the fused pass (total_blocks blocks, each reducing its
// share of one tensor into block_partials[block]) and the combine pass (one
// block per tensor, folding its blocks' partials into results[tensor]).
// block_partials holds total_blocks entries, results `tensors`. Returns the
// launch error, if any; what the kernels find arrives with the stream.
cudaError_t launch_frame_stats(const TensorEntry* table, uint32_t tensors, uint32_t total_blocks,
                               Partial* block_partials, Partial* results, cudaStream_t stream);
// The same with the cast losses' below-threshold counts (cast_tally.cuh).
cudaError_t launch_frame_stats(const TensorEntry* table, uint32_t tensors, uint32_t total_blocks,
                               CastPartial* block_partials, CastPartial* results,
                               cudaStream_t stream);

}  // namespace ovf::cuda

#endif  // OVF_CUDA_STATS_KERNELS_H
