// Partial -> ovf::Stats on the host (see partial_stats.h). The decoders are the
// CPU engine's own (stats.h), so both engines print the same doubles.
#include "partial_stats.h"

#include <cstring>
#include <limits>

namespace ovf::cuda {

static_assert(sizeof(SignedIntCodec<int8_t>::Key) == 4 && sizeof(SignedIntCodec<int16_t>::Key) == 4,
              "int8 and int16 keys share int32's layout (key_to_double)");

double key_to_double(ovf_dtype dtype, uint64_t key) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64:
    case OVF_DTYPE_FLOAT32:
    case OVF_DTYPE_FLOAT16:
    case OVF_DTYPE_BFLOAT16:
    case OVF_DTYPE_FLOAT8_E4M3:
    case OVF_DTYPE_FLOAT8_E5M2: return float_bits_to_double(key, dtype);
    case OVF_DTYPE_INT64: return static_cast<double>(SignedIntCodec<int64_t>::magnitude(key));
    case OVF_DTYPE_INT32:
    case OVF_DTYPE_INT16:
    case OVF_DTYPE_INT8:  // one 32-bit key layout for the three
      return SignedIntCodec<int32_t>::magnitude(static_cast<uint32_t>(key));
    default: return static_cast<double>(key);  // unsigned and bool: the value
  }
}

Stats partial_to_stats(const Partial& p, ovf_dtype dtype, uint64_t numel, uint64_t repeat,
                       bool negated) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Stats s;
  s.has_stats = true;
  s.numel = numel;
  s.nan_count = p.nan * repeat;
  s.pos_inf_count = (negated ? p.neg_inf : p.pos_inf) * repeat;
  s.neg_inf_count = (negated ? p.pos_inf : p.neg_inf) * repeat;
  s.zero_count = p.zero * repeat;
  s.subnormal_count = p.subnormal * repeat;
  const uint64_t finite = s.finite_count();
  s.abs_min = finite > 0 ? key_to_double(dtype, p.min_key) : kInf;
  s.abs_max = finite > 0 ? key_to_double(dtype, p.max_key) : 0;
  s.abs_min_nonzero = finite > s.zero_count ? key_to_double(dtype, p.min_nonzero_key) : kInf;
  return s;
}

}  // namespace ovf::cuda
