// The CPU stats engine: walks a (possibly strided) tensor once and reduces it to
// ovf::Stats without allocating.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#ifdef OVF_HAVE_AVX512_SCAN
#include <cpuid.h>
#endif
#include <limits>
#include <string>

#include "dim_merge.h"
#include "stats_cpu.h"
#include "stats_scan.h"

namespace ovf {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Whether this CPU has AVX-512 F and BW and runs them at full width: Zen 4
// (AMD family 19h; Zen 3, the same family, has no AVX-512) splits each 512-bit
// operation in two, where the AVX-512 copy of the statistics loop was measured
// slower than the AVX2 one; Zen 4 keeps the AVX2 loops (its counting loops were
// not measured).
bool avx512_counting_pays() {
#ifdef OVF_HAVE_AVX512_SCAN
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__builtin_cpu_is("amd") && __get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    const unsigned family = ((eax >> 8) & 0xfu) + ((eax >> 20) & 0xffu);
    if (family == 0x19) return false;
  }
  return true;
#else
  return false;
#endif
}

struct ChosenLoops {
  detail::ScanTable table;
  const char* name;  // scan_loops_name()
};

// The best copy of the scan loops this CPU runs. OVF_SCAN_ISA=base picks the
// baseline copy, OVF_SCAN_ISA=avx2 the AVX2 one without the AVX-512 counting
// loops (tests run every copy; benchmarks compare them). The AVX2 and AVX-512
// copies exist only in x86-64 builds (CMake defines OVF_HAVE_AVX2_SCAN and
// OVF_HAVE_AVX512_SCAN there).
ChosenLoops choose_scan_loops() {
  const char* wanted_name = getenv("OVF_SCAN_ISA");
  const std::string wanted = wanted_name != nullptr ? wanted_name : "";
#ifdef OVF_HAVE_AVX2_SCAN
  if (__builtin_cpu_supports("avx2") && wanted != "base") {
    ChosenLoops chosen{detail::scan_table_avx2(), "avx2"};
    if (wanted != "avx2" && avx512_counting_pays()) {
      detail::count_with_avx512(chosen.table);
      chosen.name = "avx2+avx512-counts";
    }
    return chosen;
  }
#endif
  return {detail::scan_table_base(), "base"};
}

const ChosenLoops& chosen_loops() {
  static const ChosenLoops chosen = choose_scan_loops();
  return chosen;
}

const detail::ScanTable& scan_table() { return chosen_loops().table; }

struct ScanFloatType {
  detail::ScanPair scan;
  uint64_t inf_bits;
  detail::CountBelowFn below;
};

bool scan_float_type(ovf_dtype dtype, ScanFloatType* out) {
  const auto& t = scan_table();
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: *out = {t.float64, 0, t.below64}; break;
    case OVF_DTYPE_FLOAT32: *out = {t.float32, 0, t.below32}; break;
    case OVF_DTYPE_FLOAT16: *out = {t.float16, 0, t.below16}; break;
    case OVF_DTYPE_BFLOAT16: *out = {t.bfloat16, 0, t.below16}; break;
    default: return false;
  }
  out->inf_bits = finite_end_bits(dtype);
  return true;
}

// Visits the tensor as runs of equally spaced elements, innermost run as long as
// the layout allows. Statistics do not depend on order, so dimensions are merged
// (dim_merge.h): a transposed or permuted contiguous tensor becomes one run. A
// broadcast dimension is visited as often as it repeats: every position counts.
template <typename RunFn>
bool for_each_run(const TensorView& v, int elem_size, RunFn&& run) {
  MergedDims m;
  if (!merge_dims(v.ndim, v.sizes, v.strides, &m)) return false;
  if (m.numel == 0) return true;  // no elements
  const char* base = static_cast<const char*>(v.data) + m.offset * elem_size;
  const int inner = m.ndim - 1;
  for (uint64_t r = 0; r < m.repeat; ++r) {
    std::array<int64_t, kMaxMergedDims> index{};
    for (;;) {
      int64_t offset = 0;
      for (int d = 0; d < inner; ++d) offset += index[d] * m.strides[d];
      run(base + offset * elem_size, m.sizes[inner], m.strides[inner] * elem_size);
      int d = inner - 1;
      while (d >= 0 && ++index[d] == m.sizes[d]) index[d--] = 0;
      if (d < 0) break;
    }
  }
  return true;
}

void merge(detail::BitAcc& into, const detail::BitAcc& part) {
  into.min_abs = std::min(into.min_abs, part.min_abs);
  into.max_abs = std::max(into.max_abs, part.max_abs);
  into.min_nonzero = std::min(into.min_nonzero, part.min_nonzero);
  into.nan += part.nan;
  into.pos_inf += part.pos_inf;
  into.neg_inf += part.neg_inf;
  into.zero += part.zero;
  into.subnormal += part.subnormal;
}

Stats finish_float(const detail::BitAcc& acc, uint64_t numel, ovf_dtype dtype, uint64_t inf_bits,
                   bool negated) {
  Stats s;
  s.has_stats = true;
  s.numel = numel;
  s.nan_count = acc.nan;
  s.pos_inf_count = negated ? acc.neg_inf : acc.pos_inf;
  s.neg_inf_count = negated ? acc.pos_inf : acc.neg_inf;
  s.zero_count = acc.zero;
  s.subnormal_count = acc.subnormal;
  s.abs_min = acc.min_abs == inf_bits ? kInf : float_bits_to_double(acc.min_abs, dtype);
  s.abs_max = float_bits_to_double(acc.max_abs, dtype);
  s.abs_min_nonzero =
      acc.min_nonzero == inf_bits ? kInf : float_bits_to_double(acc.min_nonzero, dtype);
  return s;
}

uint64_t count_elements(const TensorView& v) {
  uint64_t n = 1;
  for (int d = 0; d < v.ndim; ++d) n *= static_cast<uint64_t>(v.sizes[d]);
  return n;
}

Stats stats_float_bits(const TensorView& v, const ScanFloatType& t, int elem_size,
                       bool with_casts) {
  detail::BitAcc acc{t.inf_bits, 0, t.inf_bits};
  // The cast counts read each span right after the statistics loop did, while
  // it is still in L1, and use its range: one pass over memory for both.
  const CastBounds* bounds = with_casts ? cast_bounds(v.dtype) : nullptr;
  uint64_t below[kCastCounts] = {};
  // The limits inside the last span's range: the next span's statistics loop
  // counts them (up to its fused_limits), and count_below only what that missed.
  uint32_t inside = 0;
  const auto scan = [&](const char* p, uint64_t n) {
    if (bounds == nullptr) {
      t.scan.scan(p, n, acc);
      return;
    }
    for (uint64_t done = 0; done < n; done += detail::kCountSpan) {
      const uint64_t m = std::min(detail::kCountSpan, n - done);
      const char* span_data = p + done * elem_size;
      int fused[detail::kMaxFusedLimits];
      int count = 0;
      uint32_t counted = 0;
      for (int k = 0; k < detail::kCountLimits && count < t.scan.fused_limits; ++k) {
        if ((inside >> k) & 1u) {
          fused[count++] = k;
          counted |= 1u << k;
        }
      }
      detail::BitAcc span{t.inf_bits, 0, t.inf_bits};
      t.scan.scan_counting(span_data, m, span, bounds->bits, fused, count, below);
      inside = t.below(span_data, m, bounds->bits, span, counted, below);
      merge(acc, span);
    }
  };
  // Strided runs are gathered into a small stack buffer and scanned like
  // contiguous memory: one set of inner loops serves every layout.
  alignas(64) unsigned char buffer[4096];
  const int64_t per_chunk = static_cast<int64_t>(sizeof buffer) / elem_size;
  const bool ok = for_each_run(v, elem_size, [&](const char* p, int64_t n, int64_t step) {
    if (step == elem_size) {
      scan(p, static_cast<uint64_t>(n));
      return;
    }
    for (int64_t done = 0; done < n;) {
      const int64_t m = std::min(per_chunk, n - done);
      for (int64_t i = 0; i < m; ++i) {
        std::memcpy(buffer + i * elem_size, p + (done + i) * step, elem_size);
      }
      scan(reinterpret_cast<const char*>(buffer), static_cast<uint64_t>(m));
      done += m;
    }
  });
  if (!ok) return Stats{};
  Stats s = finish_float(acc, count_elements(v), v.dtype, t.inf_bits, v.negated);
  if (bounds != nullptr) s.set_cast_from_below(below);
  return s;
}

// Integer, bool, complex and fp8 elements: decoded one at a time through
// magnitude(); these dtypes are rare in activations, clarity wins here.
template <typename MagnitudeFn>
Stats stats_by_magnitude(const TensorView& v, int elem_size, double min_normal,
                         MagnitudeFn&& magnitude, const CastBounds* bounds = nullptr) {
  Stats s;
  s.has_stats = true;
  uint64_t below[kCastCounts] = {};
  double mn = kInf, mx = 0, mnz = kInf;
  bool any_non_negative = false;  // only wrapped integer minimums (see integer_magnitude)
  const bool ok = for_each_run(v, elem_size, [&](const char* p, int64_t n, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      bool negative = false;
      const double a = magnitude(p + i * step, &negative);
      if (std::isnan(a)) {
        ++s.nan_count;
      } else if (std::isinf(a)) {
        ++(negative != v.negated ? s.neg_inf_count : s.pos_inf_count);
      } else {
        if (bounds != nullptr) {
          for (int k = 0; k < kCastCounts; ++k) below[k] += a < bounds->values[k];
        }
        mn = std::min(mn, a);
        mx = std::max(mx, a);
        any_non_negative = any_non_negative || a >= 0;
        if (a != 0) {
          mnz = std::min(mnz, a);
          if (a > 0 && a < min_normal) ++s.subnormal_count;
        } else {
          ++s.zero_count;
        }
      }
    }
  });
  if (!ok) return Stats{};
  s.numel = count_elements(v);
  s.abs_min = mn;
  s.abs_max = any_non_negative || mn == kInf ? mx : mn;
  s.abs_min_nonzero = mnz;
  if (bounds != nullptr) s.set_cast_from_below(below);
  return s;
}

template <typename T>
double integer_magnitude(const char* p, bool* negative) {
  T value;
  std::memcpy(&value, p, sizeof value);
  if constexpr (std::is_signed_v<T>) {
    *negative = value < 0;
    // torch's abs() of the most negative value wraps around to itself, and the
    // reference prints abs().min() / abs().max(): -128 for an int8 holding it.
    if (value == std::numeric_limits<T>::min()) return static_cast<double>(value);
    return static_cast<double>(value < 0 ? -value : value);
  } else {
    *negative = false;
    return static_cast<double>(value);
  }
}

// A bool byte other than 0 is true (a uint8 tensor viewed as bool may hold 2).
double bool_magnitude(const char* p, bool* negative) {
  *negative = false;
  return *p != 0 ? 1.0 : 0.0;
}

template <typename T>
double complex_magnitude(const char* p, bool* negative) {
  std::complex<T> z;
  std::memcpy(&z, p, sizeof z);
  *negative = false;
  return static_cast<double>(std::abs(z));
}

TensorView unnegated(TensorView v) {
  v.negated = false;
  return v;
}

}  // namespace

Stats compute_stats_cpu(const TensorView& v, bool with_casts) {
  const int elem_size = dtype_size(v.dtype);
  if (elem_size == 0 || (v.data == nullptr && count_elements(v) != 0)) return Stats{};
  ScanFloatType float_type;
  if (scan_float_type(v.dtype, &float_type))
    return stats_float_bits(v, float_type, elem_size, with_casts);
  switch (v.dtype) {
    case OVF_DTYPE_INT64: return stats_by_magnitude(v, 8, 1, integer_magnitude<int64_t>);
    case OVF_DTYPE_INT32: return stats_by_magnitude(v, 4, 1, integer_magnitude<int32_t>);
    case OVF_DTYPE_INT16: return stats_by_magnitude(v, 2, 1, integer_magnitude<int16_t>);
    case OVF_DTYPE_INT8: return stats_by_magnitude(v, 1, 1, integer_magnitude<int8_t>);
    case OVF_DTYPE_UINT8: return stats_by_magnitude(v, 1, 1, integer_magnitude<uint8_t>);
    case OVF_DTYPE_UINT16: return stats_by_magnitude(v, 2, 1, integer_magnitude<uint16_t>);
    case OVF_DTYPE_UINT32: return stats_by_magnitude(v, 4, 1, integer_magnitude<uint32_t>);
    case OVF_DTYPE_UINT64: return stats_by_magnitude(v, 8, 1, integer_magnitude<uint64_t>);
    case OVF_DTYPE_BOOL: return stats_by_magnitude(v, 1, 1, bool_magnitude);
    // |-z| = |z|: a negated complex tensor's infinite magnitudes stay +inf.
    case OVF_DTYPE_COMPLEX64:
      return stats_by_magnitude(unnegated(v), 8, std::numeric_limits<float>::min(),
                                complex_magnitude<float>);
    case OVF_DTYPE_COMPLEX128:
      return stats_by_magnitude(unnegated(v), 16, std::numeric_limits<double>::min(),
                                complex_magnitude<double>);
    case OVF_DTYPE_FLOAT8_E4M3:
    case OVF_DTYPE_FLOAT8_E5M2: {
      const ovf_dtype dtype = v.dtype;
      const double min_normal =
          dtype == OVF_DTYPE_FLOAT8_E4M3 ? std::ldexp(1.0, -6) : std::ldexp(1.0, -14);
      return stats_by_magnitude(
          v, 1, min_normal,
          [dtype](const char* p, bool* negative) {
            const double x = element_to_double(p, dtype);
            *negative = std::signbit(x);
            return std::fabs(x);
          },
          with_casts ? cast_bounds(dtype) : nullptr);
    }
    default: return Stats{};
  }
}

namespace {

template <typename U>
uint64_t count_bits_below(const char* p, int64_t n, int64_t step, U mask, U limit) {
  uint64_t count = 0;
  if (step == static_cast<int64_t>(sizeof(U))) {
    const U* q = reinterpret_cast<const U*>(p);
    for (int64_t i = 0; i < n; ++i) {
      const U a = q[i] & mask;
      count += (a != 0) & (a < limit);
    }
    return count;
  }
  for (int64_t i = 0; i < n; ++i) {
    U bits;
    std::memcpy(&bits, p + i * step, sizeof bits);
    const U a = bits & mask;
    count += (a != 0) & (a < limit);
  }
  return count;
}

}  // namespace

uint64_t count_below(const TensorView& v, double threshold) {
  ScanFloatType t;
  if (!scan_float_type(v.dtype, &t) || !(threshold > 0)) return 0;
  const uint64_t limit = first_abs_bits(threshold, /*strictly_above=*/false, v.dtype);
  const int size = dtype_size(v.dtype);
  uint64_t count = 0;
  for_each_run(v, size, [&](const char* p, int64_t n, int64_t step) {
    switch (size) {
      case 8: count += count_bits_below<uint64_t>(p, n, step, ~(1ull << 63), limit); break;
      case 4:
        count += count_bits_below<uint32_t>(p, n, step, 0x7fffffffu, static_cast<uint32_t>(limit));
        break;
      default:
        count += count_bits_below<uint16_t>(p, n, step, 0x7fff, static_cast<uint16_t>(limit));
        break;
    }
  });
  return count;
}

Stats compute_stats_contiguous(const void* data, ovf_dtype dtype, uint64_t n) {
  const int64_t size = static_cast<int64_t>(n);
  const int64_t stride = 1;
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = 1;
  v.sizes = &size;
  v.strides = &stride;
  return compute_stats_cpu(v);
}

const char* scan_loops_name() { return chosen_loops().name; }

}  // namespace ovf
