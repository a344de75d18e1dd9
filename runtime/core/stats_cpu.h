// The CPU statistics engine: one pass over a tensor in host memory.
#ifndef OVF_STATS_CPU_H
#define OVF_STATS_CPU_H

#include <cstdint>

#include "stats.h"

namespace ovf {

// Reads every element once, allocates nothing. Returns has_stats = false for an
// unknown dtype; an empty tensor gives numel = 0 with has_stats = true.
// with_casts: real floating types also count what casts would lose (has_cast).
Stats compute_stats_cpu(const TensorView& view, bool with_casts = false);

// The same over a contiguous buffer of n elements (what benchmarks and tests call).
Stats compute_stats_contiguous(const void* data, ovf_dtype dtype, uint64_t n);

// The copy of the scan loops this process runs: "base", "avx2", or
// "avx2+avx512-counts" (AVX2 statistics, AVX-512 cast counting); see
// OVF_SCAN_ISA in stats_cpu.cpp.
const char* scan_loops_name();

// Headroom against a narrower floating type: finite non-zero |x| below
// `threshold` (that type's smallest normal). A second read of the tensor, done
// only when headroom is asked for (control.headroom_dtype).
uint64_t count_below(const TensorView& view, double threshold);

}  // namespace ovf

#endif  // OVF_STATS_CPU_H
