#include "cast_loss.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "control.h"
#include "stats.h"

namespace ovf {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A target's edges as exact values. A finite |x| overflows at or above
// `overflow` (above it where `overflow_exclusive`); flushes at or below half the
// smallest subnormal; is subnormal below min_normal - half that subnormal (the
// largest subnormal has an odd significand, so the tie goes up to min_normal).
struct TargetEdges {
  double overflow;
  bool overflow_exclusive;
  double min_subnormal;
  double min_normal;
};

TargetEdges edges(int target) {
  switch (target) {
    // max 65504: 65520 is halfway to 65536 and ties to the even inf
    case OVF_CAST_FLOAT16: return {65520.0, false, std::ldexp(1.0, -24), std::ldexp(1.0, -14)};
    // max (2 - 2^-7) 2^127, same tie
    case OVF_CAST_BFLOAT16:
      return {std::ldexp(511.0, 119), false, std::ldexp(1.0, -133), std::ldexp(1.0, -126)};
    // max 448 = 1.75 2^8 has an even significand: 464 rounds back to it, above
    // it torch makes 0x7f, which e4m3fn reads as NaN (it has no inf)
    case OVF_CAST_FLOAT8_E4M3: return {464.0, true, std::ldexp(1.0, -9), std::ldexp(1.0, -6)};
    // max 57344 = 1.75 2^15: 61440 ties up to inf
    default: return {61440.0, false, std::ldexp(1.0, -16), std::ldexp(1.0, -14)};
  }
}

// The edges as thresholds on |x|: below[3t] counts what does not overflow,
// below[3t + 1] what flushes (and zeros), below[3t + 2] what is not normal.
// Each threshold is the first value at or above `at`, or strictly above it.
struct Threshold {
  double at;
  bool strictly_above;
};

Threshold threshold(int index) {
  const TargetEdges e = edges(index / OVF_CAST_LOSSES);
  switch (index % OVF_CAST_LOSSES) {
    case OVF_CAST_OVERFLOW: return {e.overflow, e.overflow_exclusive};
    case OVF_CAST_FLUSH: return {e.min_subnormal / 2, true};
    default: return {e.min_normal - e.min_subnormal / 2, false};
  }
}

uint64_t bits_of(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// torch converts float64 to the narrow types through float32 (c10::Half and
// friends are built from a float): a double is judged by the float it rounds
// to. The first double that rounds to the float threshold f or above: the
// midpoint between f and the float below it, or the double after the midpoint
// when the tie rounds down (the float below has the even significand).
uint64_t first_double_bits_meeting(Threshold t) {
  const uint64_t f_bits = first_abs_bits(t.at, t.strictly_above, OVF_DTYPE_FLOAT32);
  if (f_bits == 0) return 0;
  if (f_bits == finite_end_bits(OVF_DTYPE_FLOAT32)) return finite_end_bits(OVF_DTYPE_FLOAT64);
  const double f = float_bits_to_double(f_bits, OVF_DTYPE_FLOAT32);
  const double below = float_bits_to_double(f_bits - 1, OVF_DTYPE_FLOAT32);
  const double mid = below + (f - below) / 2;  // exact: 25 significant bits
  const bool tie_goes_up = (f_bits & 1u) == 0;
  return tie_goes_up ? bits_of(mid) : bits_of(mid) + 1;
}

CastBounds make_bounds(ovf_dtype source) {
  CastBounds b{};
  for (int k = 0; k < kCastCounts; ++k) {
    const Threshold t = threshold(k);
    b.bits[k] = source == OVF_DTYPE_FLOAT64 ? first_double_bits_meeting(t)
                                            : first_abs_bits(t.at, t.strictly_above, source);
    b.values[k] =
        b.bits[k] == finite_end_bits(source) ? kInf : float_bits_to_double(b.bits[k], source);
  }
  return b;
}

}  // namespace

bool CastCounts::operator==(const CastCounts& o) const {
  return std::memcmp(n, o.n, sizeof n) == 0;
}

const CastBounds* cast_bounds(ovf_dtype source) {
  static const CastBounds f64 = make_bounds(OVF_DTYPE_FLOAT64);
  static const CastBounds f32 = make_bounds(OVF_DTYPE_FLOAT32);
  static const CastBounds f16 = make_bounds(OVF_DTYPE_FLOAT16);
  static const CastBounds bf16 = make_bounds(OVF_DTYPE_BFLOAT16);
  static const CastBounds e4m3 = make_bounds(OVF_DTYPE_FLOAT8_E4M3);
  static const CastBounds e5m2 = make_bounds(OVF_DTYPE_FLOAT8_E5M2);
  switch (source) {
    case OVF_DTYPE_FLOAT64: return &f64;
    case OVF_DTYPE_FLOAT32: return &f32;
    case OVF_DTYPE_FLOAT16: return &f16;
    case OVF_DTYPE_BFLOAT16: return &bf16;
    case OVF_DTYPE_FLOAT8_E4M3: return &e4m3;
    case OVF_DTYPE_FLOAT8_E5M2: return &e5m2;
    default: return nullptr;
  }
}

CastCounts cast_counts_from_below(const uint64_t* below, uint64_t finite, uint64_t zero) {
  CastCounts c;
  for (int t = 0; t < OVF_CAST_TARGETS; ++t) {
    const uint64_t* b = below + t * OVF_CAST_LOSSES;
    uint64_t* out = c.n + t * OVF_CAST_LOSSES;
    out[OVF_CAST_OVERFLOW] = finite - b[OVF_CAST_OVERFLOW];
    out[OVF_CAST_FLUSH] = b[OVF_CAST_FLUSH] - zero;
    out[OVF_CAST_SUBNORMAL] = b[OVF_CAST_SUBNORMAL] - b[OVF_CAST_FLUSH];
  }
  return c;
}

int cast_loss_over_limit(const ovf_record& line, const ovf_control& control) {
  if (!(line.flags & OVF_FLAG_CAST) || line.numel == 0) return -1;
  const uint32_t target = read_control(control.cast_target);
  if (target >= OVF_CAST_TARGETS) return -1;
  const double limits[OVF_CAST_LOSSES] = {read_control(control.cast_overflow_max),
                                          read_control(control.cast_flush_max),
                                          read_control(control.cast_subnormal_max)};
  const uint32_t* counts = line.cast_counts + target * OVF_CAST_LOSSES;
  for (int loss = 0; loss < OVF_CAST_LOSSES; ++loss) {
    // a share above a limit >= 0 holds at least one value: 0 stops at the first
    if (limits[loss] >= 0 && double(counts[loss]) / line.numel > limits[loss]) return loss;
  }
  return -1;
}

const char* cast_target_name(int target) {
  static const char* const names[] = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
  return target >= 0 && target < OVF_CAST_TARGETS ? names[target] : "unknown";
}

}  // namespace ovf
