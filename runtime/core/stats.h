// What every source of statistics produces (the CPU engine, a device engine,
// the weight cache) and the facts about element types they share.
#ifndef OVF_STATS_H
#define OVF_STATS_H

#include <cstdint>

#include "cast_loss.h"
#include "ovf/ring.h"

namespace ovf {

// A read-only view of a tensor's memory, independent of torch. Strides are in
// elements; every element the sizes address must be readable.
struct TensorView {
  const void* data = nullptr;
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  int ndim = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  bool negated = false;  // torch's lazy negative bit: swap the signs of infinities
};

// abs_min / abs_max / abs_min_nonzero cover finite elements only; the counts say
// what else there was. For integer and bool tensors the same fields hold the
// magnitudes (no NaN/Inf can occur); complex tensors use |z|.
struct Stats {
  uint64_t numel = 0;
  uint64_t nan_count = 0;
  uint64_t pos_inf_count = 0;
  uint64_t neg_inf_count = 0;
  uint64_t zero_count = 0;
  uint64_t subnormal_count = 0;
  double abs_min = 0;          // +inf when no finite element
  double abs_max = 0;          // 0 when no finite element
  double abs_min_nonzero = 0;  // +inf when no finite non-zero element
  bool has_stats = false;      // false for dtypes the engine cannot read
  // What casts to the narrow types would lose (cast_loss.h), when asked for and
  // the dtype is a real floating one.
  bool has_cast = false;
  CastCounts cast;

  uint64_t nonfinite_count() const { return nan_count + pos_inf_count + neg_inf_count; }
  bool nonfinite() const { return nonfinite_count() > 0; }
  uint64_t finite_count() const { return numel - nan_count - pos_inf_count - neg_inf_count; }
  // Sets the cast losses from an engine's below-threshold counts (cast_loss.h),
  // once the finite and zero counts are in.
  void set_cast_from_below(const uint64_t* below) {
    has_cast = true;
    cast = cast_counts_from_below(below, finite_count(), zero_count);
  }
};

// Whether two engines agree on every field (NaN-free: all fields are counts
// or magnitudes of finite values, infinities aside).
inline bool same_stats(const Stats& a, const Stats& b) {
  return a.has_stats == b.has_stats && a.numel == b.numel && a.nan_count == b.nan_count &&
         a.pos_inf_count == b.pos_inf_count && a.neg_inf_count == b.neg_inf_count &&
         a.zero_count == b.zero_count && a.subnormal_count == b.subnormal_count &&
         a.abs_min == b.abs_min && a.abs_max == b.abs_max &&
         a.abs_min_nonzero == b.abs_min_nonzero && a.has_cast == b.has_cast && a.cast == b.cast;
}

// Bytes per element, 0 for OVF_DTYPE_UNKNOWN.
int dtype_size(ovf_dtype dtype);
const char* dtype_name(ovf_dtype dtype);
bool is_floating(ovf_dtype dtype);  // floating and complex types: the ones that hold NaN/Inf

// The largest finite value and the smallest normal of a floating dtype
// (0 for other dtypes).
double dtype_max(ovf_dtype dtype);
double dtype_min_normal(ovf_dtype dtype);

// Decodes one element to double (tests and the reference implementation).
double element_to_double(const void* element, ovf_dtype dtype);

// Bit patterns of the narrow floating types as doubles.
double half_bits_to_double(uint16_t bits);
double bfloat16_bits_to_double(uint16_t bits);
double float8_e4m3_to_double(uint8_t bits);
double float8_e5m2_to_double(uint8_t bits);
// The value of a floating dtype's bit pattern (the low bits of `bits`), 0 for
// other dtypes: what both engines turn their bit-pattern keys back into.
double float_bits_to_double(uint64_t bits, ovf_dtype dtype);

// The first abs-bit pattern past a real floating dtype's finite values: its Inf,
// or NaN for float8_e4m3fn (which has no Inf); 0 for other dtypes.
uint64_t finite_end_bits(ovf_dtype dtype);

// The smallest abs-bit pattern of a real floating dtype whose value is >= t (or
// > t when strictly_above): the integer threshold for a compare in the bits
// domain, where values are monotonic. finite_end_bits when no finite value is.
uint64_t first_abs_bits(double t, bool strictly_above, ovf_dtype dtype);

}  // namespace ovf

#endif  // OVF_STATS_H
