// A tensor's finished Partial (device keys and counts) as the ovf::Stats every
// engine produces, with the CPU engine's exact semantics (stats.h).
#ifndef OVF_CUDA_PARTIAL_STATS_H
#define OVF_CUDA_PARTIAL_STATS_H

#include <cstdint>

#include "stats.h"
#include "stats_functors.cuh"

namespace ovf::cuda {

// The value |x| of a finite element whose key (stats_functors.cuh) is `key`.
double key_to_double(ovf_dtype dtype, uint64_t key);

// numel: the view's element count; repeat: how often each element read was
// counted (MergedDims::repeat, broadcast dimensions), which scales the counts;
// negated: torch's lazy negation bit, which swaps the infinities' signs.
Stats partial_to_stats(const Partial& p, ovf_dtype dtype, uint64_t numel, uint64_t repeat,
                       bool negated);

}  // namespace ovf::cuda

#endif  // OVF_CUDA_PARTIAL_STATS_H
