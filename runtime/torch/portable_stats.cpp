#include "portable_stats.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

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

// The most elements one pass of the ops reads: every temporary of a pass (a
// float copy, |x|, the masks, the where()s) has at most this many, so the
// extra memory is bounded whatever the tensor's size (a 4.3e9-element bf16
// logits tensor took about 17 GB per float temporary in one pass, and on
// out-of-memory its lines read "no data"). 2^23 elements: measured on the CPU,
// a pass's peak is about 7 float32 copies of a piece (230 MiB; 460 MiB where
// the work type is float64), where one pass over 2^26 float32 elements took
// 1.6 GiB. OVF_TEST_PORTABLE_CHUNK=N (tests) sets it.
int64_t elements_per_pass() {
  static const int64_t limit = [] {
    const char* text = std::getenv("OVF_TEST_PORTABLE_CHUNK");
    const long long n = text != nullptr ? std::atoll(text) : 0;
    return n > 0 ? static_cast<int64_t>(n) : int64_t{1} << 23;
  }();
  return limit;
}

// Views of `t` (no copy) of at most `limit` elements each, which together hold
// every element once: slices of a contiguous tensor's flat view; otherwise
// runs of the first dimension, a single index of it cut again where still too
// large (an expanded dimension repeats its elements in each view, as in t).
void split(const at::Tensor& t, int64_t limit, std::vector<at::Tensor>& pieces) {
  const int64_t n = t.numel();
  if (n <= limit || t.dim() == 0) {
    pieces.push_back(t);
  } else if (t.is_contiguous()) {
    const at::Tensor flat = t.view(-1);
    for (int64_t start = 0; start < n; start += limit)
      pieces.push_back(flat.narrow(0, start, std::min(limit, n - start)));
  } else {
    const int64_t outer = t.size(0);
    const int64_t per_index = n / outer;
    const int64_t run = std::max<int64_t>(1, limit / per_index);
    for (int64_t start = 0; start < outer; start += run) {
      if (run == 1 && per_index > limit) {
        split(t.select(0, start), limit, pieces);
      } else {
        pieces.push_back(t.narrow(0, start, std::min(run, outer - start)));
      }
    }
  }
}

// One pass: the row of a piece whose negative bit is already off.
at::Tensor piece_row(at::Tensor v, ovf_dtype dtype, ovf_dtype headroom, bool with_casts) {
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
  const at::Tensor columns[kCastBelow] = {
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
  // The cast counts' thresholds are values of the tensor's own dtype, exact in
  // the work type: |x| < value is the CPU engine's compare of abs bits.
  const CastBounds* bounds = with_casts ? cast_bounds(dtype) : nullptr;
  for (int k = 0; k < kCastCounts; ++k) {
    row.push_back(bounds != nullptr ? a.lt(bounds->values[k]).sum().to(at::kDouble)
                                    : at::zeros({}, a.options().dtype(at::kDouble)));
  }
  return at::stack(row);
}

}  // namespace

at::Tensor portable_stats_row(const at::Tensor& t, ovf_dtype dtype, ovf_dtype headroom,
                              bool with_casts) {
  // The lazy negative bit is taken off, not resolved (resolving runs neg(),
  // which float8 types lack): the caller swaps the infinities' signs back.
  const at::Tensor v = t.is_neg() ? at::_neg_view(t) : t;
  std::vector<at::Tensor> pieces;
  split(v, elements_per_pass(), pieces);
  if (pieces.size() == 1) return piece_row(pieces.front(), dtype, headroom, with_casts);
  std::vector<at::Tensor> rows;
  rows.reserve(pieces.size());
  for (const at::Tensor& piece : pieces)
    rows.push_back(piece_row(piece, dtype, headroom, with_casts));
  // Counts add up; the smallest and largest magnitudes are the pieces' least
  // and greatest (a piece without finite values says +inf and 0, as a row does).
  const at::Tensor all = at::stack(rows);
  const at::Tensor sums = all.sum(0), least = all.amin(0), greatest = all.amax(0);
  const at::Tensor combined[kCastBelow] = {
      sums[kNanCount],   sums[kPosInfCount],    sums[kNegInfCount],
      sums[kZeroCount],  sums[kSubnormalCount], least[kAbsMin],
      greatest[kAbsMax], least[kAbsMinNonzero], sums[kUnderflowCount],
  };
  return at::cat({at::stack(combined), sums.narrow(0, kCastBelow, kCastCounts)});
}

Stats stats_from_row(const double* row, uint64_t numel, bool swap_infinities, ovf_dtype dtype,
                     bool with_casts) {
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
  if (with_casts && cast_bounds(dtype) != nullptr) {
    uint64_t below[kCastCounts];
    for (int k = 0; k < kCastCounts; ++k) below[k] = static_cast<uint64_t>(row[kCastBelow + k]);
    s.set_cast_from_below(below);
  }
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
