// What a cast to a narrower floating type would lose (ring.h's cast_counts):
// the elements that would overflow, flush to zero or turn subnormal in float16,
// bfloat16, float8_e4m3fn and float8_e5m2, as torch's own conversions round
// (to nearest, ties to even).
//
// Every one of the twelve counts is a difference of counts of elements whose
// |x| lies below a threshold, and |x| below a threshold is one integer compare
// of the element's abs bits: the engines count those (the CPU scan, the
// portable backend) and cast_counts_from_below turns them into losses.
#ifndef OVF_CAST_LOSS_H
#define OVF_CAST_LOSS_H

#include <cstdint>

#include "ovf/ring.h"

namespace ovf {

constexpr int kCastCounts = static_cast<int>(OVF_CAST_TARGETS) * OVF_CAST_LOSSES;

struct CastCounts {
  uint64_t n[kCastCounts] = {};  // index ovf_cast_target * 3 + ovf_cast_loss

  uint64_t at(int target, int loss) const { return n[target * OVF_CAST_LOSSES + loss]; }
  bool operator==(const CastCounts& o) const;
};

// The thresholds for one source dtype, per target t: [3t] the first |x| that
// overflows, [3t + 1] the first non-zero |x| that does not flush to zero,
// [3t + 2] the first |x| that stays normal. As abs bits of the source dtype
// (the CPU scan compares those) and as values (the portable backend's compares;
// each is exactly representable in the source dtype, +inf where nothing
// overflows). For every real floating dtype (float8 ones are read by value);
// null for the others (integers, complex, bool).
struct CastBounds {
  uint64_t bits[kCastCounts];
  double values[kCastCounts];
};
const CastBounds* cast_bounds(ovf_dtype source);

// The losses from below[k] (elements whose |x| is below threshold k; NaN and
// Inf never are), the finite count and the zero count.
CastCounts cast_counts_from_below(const uint64_t* below, uint64_t finite, uint64_t zero);

// The ovf_cast_loss of a line (flagged OVF_FLAG_CAST) whose share of its
// elements lost in a cast to control.cast_target is above its limit there
// (overflow first, then flush, then subnormal); -1 when none is.
int cast_loss_over_limit(const ovf_record& line, const ovf_control& control);

// A cast target's torch name: "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2".
const char* cast_target_name(int target);

}  // namespace ovf

#endif  // OVF_CAST_LOSS_H
