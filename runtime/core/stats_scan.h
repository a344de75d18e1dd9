// Inner loops of the CPU stats engine, compiled once per instruction set
// (stats_scan_base.cpp, stats_scan_avx2.cpp) and picked at run time. An AVX-512
// copy was measured slower on Zen 4, whose AVX-512 units are 256 bits wide.
#ifndef OVF_STATS_SCAN_H
#define OVF_STATS_SCAN_H

#include <cstdint>

namespace ovf::detail {

// A scan's running state in the "abs bits" domain of one floating type: the
// value with its sign bit cleared, read as an unsigned integer. For IEEE formats
// that integer order is the order of |x|, NaNs sort above the Inf pattern, so
// min/max/classification are integer compares that vectorise for every width.
struct BitAcc {
  uint64_t min_abs;      // over finite; starts at the type's Inf pattern ("none")
  uint64_t max_abs;      // over finite; starts at 0
  uint64_t min_nonzero;  // over finite non-zero; starts at the Inf pattern
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;
};

// Scans n contiguous elements into acc.
using ScanFn = void (*)(const void* data, uint64_t n, BitAcc& acc);

// Adds to below[k], k < kCountLimits, how many of n contiguous elements have
// abs bits below limits[k] (every limit non-zero and at most the type's Inf
// pattern): what the cast counts are made of (cast_loss.h). `span` is those
// elements' own scan (a BitAcc the ScanFn filled from its initial values); n is
// at most kCountSpan.
constexpr int kCountLimits = 12;
constexpr uint64_t kCountSpan = 1024;
using CountBelowFn = void (*)(const void* data, uint64_t n, const uint64_t* limits,
                              const BitAcc& span, uint64_t* below);

struct ScanTable {
  ScanFn float64, float32, float16, bfloat16;
  CountBelowFn below64, below32, below16;  // by element width
};

ScanTable scan_table_base();
ScanTable scan_table_avx2();

}  // namespace ovf::detail

#endif  // OVF_STATS_SCAN_H
