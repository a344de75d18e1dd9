// Inner loops of the CPU stats engine, compiled once per instruction set
// (stats_scan_base.cpp, stats_scan_avx2.cpp) and picked at run time. The
// statistics loops are the generic ones of stats_scan.inc (an AVX-512 copy was
// measured slower on Zen 4, whose AVX-512 units are 256 bits wide); the cast
// counts have loops written with intrinsics for AVX2 and AVX-512
// (stats_count.inc), which prefetch and, on AVX-512, count in mask registers.
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

// The cast counts (cast_loss.h) are made of counts of elements whose abs bits
// lie below limits[k], k < kCountLimits (every limit non-zero and at most the
// type's Inf pattern). They are counted a span of at most kCountSpan elements
// at a time (a span stays in L1 between the two calls below):
constexpr int kCountLimits = 12;
constexpr uint64_t kCountSpan = 4096;
// ... first a ScanFn that also adds to below[which[w]], w < count, how many
// elements lie below those limits, in the same loop (count <= the ScanPair's
// fused_limits: kFusedLimits for the generic loops, at most kMaxFusedLimits);
constexpr int kFusedLimits = 4;
constexpr int kMaxFusedLimits = 8;
using ScanCountingFn = void (*)(const void* data, uint64_t n, BitAcc& acc, const uint64_t* limits,
                                const int* which, int count, uint64_t* below);
// ... then the rest: adds to below[k] for every limit not in the mask `counted`,
// told the span's own scan (a BitAcc the scan filled from its initial values),
// and returns the mask of the limits inside the span's range of non-zero finite
// magnitudes (the ones worth counting in the next span's loop).
using CountBelowFn = uint32_t (*)(const void* data, uint64_t n, const uint64_t* limits,
                                  const BitAcc& span, uint32_t counted, uint64_t* below);

struct ScanPair {
  ScanFn scan;
  ScanCountingFn scan_counting;
  int fused_limits;
};

struct ScanTable {
  ScanPair float64, float32, float16, bfloat16;
  CountBelowFn below64, below32, below16;  // by element width
};

ScanTable scan_table_base();
ScanTable scan_table_avx2();
// Replaces the cast-counting loops of float32, float16 and bfloat16 (their
// counting scans and count_below) by AVX-512 ones, which count in mask
// registers: a compare and a masked add per limit and 16 or 32 elements.
void count_with_avx512(ScanTable& table);

}  // namespace ovf::detail

#endif  // OVF_STATS_SCAN_H
