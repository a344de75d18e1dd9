#include "portable_stats.h"

#include <ATen/ATen.h>

#include <limits>

namespace ovf {
namespace {

// The narrowest floating type that holds every value of `dtype` exactly, so
// that min, max and the comparisons give the CPU engine's numbers.
at::ScalarType work_type(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT32:
    case OVF_DTYPE_FLOAT16:
    case OVF_DTYPE_BFLOAT16:
    case OVF_DTYPE_FLOAT8_E4M3:
    case OVF_DTYPE_FLOAT8_E5M2:
    case OVF_DTYPE_COMPLEX64:  // |z| is computed in float32, as the CPU engine does
    case OVF_DTYPE_INT16:
    case OVF_DTYPE_INT8:
    case OVF_DTYPE_UINT8:
    case OVF_DTYPE_UINT16:
    case OVF_DTYPE_BOOL: return at::kFloat;
    default: return at::kDouble;  // float64, complex128, and 32/64-bit integers
  }
}

}  // namespace

at::Tensor portable_stats_row(const at::Tensor& t, ovf_dtype dtype, ovf_dtype headroom) {
  // The lazy negative bit is taken off, not resolved (resolving runs neg(),
  // which float8 types lack): the caller swaps the infinities' signs back.
  at::Tensor v = t.is_neg() ? at::_neg_view(t) : t;
  if (v.is_complex()) {
    // |z| as std::abs gives it (hypot in double, rounded to the part's type):
    // torch's own abs of complex64 overflows and underflows where hypot does not.
    const at::Tensor parts = at::view_as_real(v.resolve_conj()).to(at::kDouble);
    v = at::hypot(parts.select(-1, 0), parts.select(-1, 1)).to(work_type(dtype));
  }
  // A bool is read through its bytes: one holding 2 (a uint8 tensor viewed as
  // bool) is true, magnitude 1, whatever a conversion of it would make.
  if (dtype == OVF_DTYPE_BOOL) v = v.view(at::kByte).ne(0);
  // Signed integers take abs() in their own type, as the reference does: the
  // most negative value wraps around to itself (-128 for int8) in the CPU
  // engine too. Unsigned ones are their own magnitude (torch has no abs() for
  // uint16/32/64).
  const bool signed_integer = dtype == OVF_DTYPE_INT8 || dtype == OVF_DTYPE_INT16 ||
                              dtype == OVF_DTYPE_INT32 || dtype == OVF_DTYPE_INT64;
  const at::Tensor cast = v.to(work_type(dtype));
  const at::Tensor a = signed_integer ? v.abs().to(work_type(dtype)) : cast.abs();
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor finite = a.isfinite();
  const at::Tensor finite_nonzero = finite.logical_and(a.ne(0));
  // (a wrapped integer minimum, -128 for int8, is negative: never subnormal)
  const at::Tensor finite_positive = finite.logical_and(a.gt(0));
  const at::Tensor underflow =
      headroom == OVF_DTYPE_UNKNOWN
          ? at::zeros({}, a.options().dtype(at::kLong))
          : finite_positive.logical_and(a.lt(dtype_min_normal(headroom))).sum();
  const at::Tensor columns[kPortableColumns] = {
      cast.isnan().sum(),
      cast.isposinf().sum(),
      cast.isneginf().sum(),
      a.eq(0).sum(),
      finite_positive.logical_and(a.lt(dtype_min_normal(dtype))).sum(),
      at::where(finite, a, at::scalar_tensor(inf, a.options())).min(),
      at::where(finite, a, at::scalar_tensor(0.0, a.options())).max(),
      at::where(finite_nonzero, a, at::scalar_tensor(inf, a.options())).min(),
      underflow,
  };
  std::vector<at::Tensor> row;
  row.reserve(kPortableColumns);
  for (const at::Tensor& c : columns) row.push_back(c.to(at::kDouble));
  return at::stack(row);
}

Stats stats_from_row(const double* row, uint64_t numel, bool swap_infinities) {
  Stats s;
  s.has_stats = true;
  s.numel = numel;
  s.nan_count = static_cast<uint64_t>(row[kNanCount]);
  s.pos_inf_count = static_cast<uint64_t>(row[swap_infinities ? kNegInfCount : kPosInfCount]);
  s.neg_inf_count = static_cast<uint64_t>(row[swap_infinities ? kPosInfCount : kNegInfCount]);
  s.zero_count = static_cast<uint64_t>(row[kZeroCount]);
  s.subnormal_count = static_cast<uint64_t>(row[kSubnormalCount]);
  s.abs_min = row[kAbsMin];
  s.abs_max = row[kAbsMax];
  s.abs_min_nonzero = row[kAbsMinNonzero];
  return s;
}

bool negates_infinities(const at::Tensor& t) { return t.is_neg() && !t.is_complex(); }

Stats empty_stats() {
  Stats s;
  s.has_stats = true;
  s.abs_min = std::numeric_limits<double>::infinity();
  s.abs_max = 0;
  s.abs_min_nonzero = std::numeric_limits<double>::infinity();
  return s;
}

}  // namespace ovf
