// The portable device backend: a tensor's statistics from a fixed, small set
// of ATen ops that run on the tensor's own device (CUDA, ROCm, XPU, MPS, or the
// CPU in tests). The result is a row of doubles on that device; copying it to
// the host is the caller's (device_batch.cpp: one asynchronous copy per frame).
#ifndef OVF_PORTABLE_STATS_H
#define OVF_PORTABLE_STATS_H

#include <ATen/core/Tensor.h>

#include "stats.h"

namespace ovf {

// The row's columns.
enum PortableColumn {
  kNanCount,
  kPosInfCount,
  kNegInfCount,
  kZeroCount,
  kSubnormalCount,
  kAbsMin,
  kAbsMax,
  kAbsMinNonzero,
  kUnderflowCount,  // finite non-zero values below `headroom`'s smallest normal
  kCastBelow,       // kCastCounts columns: |x| below each of cast_bounds' values (zero when
                    // casts are not counted)
  kPortableColumns = kCastBelow + kCastCounts
};

// Enqueues the ops for a non-empty strided tensor of a dtype ovf reads; a
// float64 row of kPortableColumns values on the tensor's device. A tensor with
// torch's lazy negative bit is read as stored: see swap_infinities below. `headroom`:
// the dtype the underflow count is measured against (OVF_DTYPE_UNKNOWN: none);
// `with_casts`: the cast columns are counted (real floating dtypes).
// Call with op observation, autograd and autocast off (device_batch.cpp does).
at::Tensor portable_stats_row(const at::Tensor& tensor, ovf_dtype dtype, ovf_dtype headroom,
                              bool with_casts);

// The row (on the host) as Stats of a tensor of `numel` elements of `dtype`;
// `swap_infinities` for a real tensor with the negative bit (negates_infinities);
// `with_casts` when the row was made with them.
Stats stats_from_row(const double* row, uint64_t numel, bool swap_infinities, ovf_dtype dtype,
                     bool with_casts);

// Whether a tensor's row counts its +inf as -inf and back: the negative bit of
// a real tensor (|-z| = |z| for a complex one).
bool negates_infinities(const at::Tensor& tensor);

// The Stats of a tensor with no elements, as the CPU engine gives them.
Stats empty_stats();

}  // namespace ovf

#endif  // OVF_PORTABLE_STATS_H
