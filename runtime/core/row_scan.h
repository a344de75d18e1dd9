// Which rows of a tensor's first dimension -- a batch's, in most tensors a
// model sees -- hold its NaN/Inf values: measured for the session's first
// non-finite line only (a second read of that tensor, at the event and never
// before), kept in the line's record (ring.h's row_extent, row_count, rows).
#ifndef OVF_ROW_SCAN_H
#define OVF_ROW_SCAN_H

#include <cstdint>

#include "ovf/ring.h"
#include "stats.h"

namespace ovf {

// More rows than this are not scanned one by one (a long 1-D tensor's "rows"
// are its elements, no batch's).
constexpr int64_t kMaxRowsScanned = 1 << 16;

// Whether a line with these statistics is the one whose rows are measured: it
// holds a NaN/Inf, the session has seen none before it, and it is not made in
// an expected region (monitor.h; `expecting`: whether it was made in one, for
// a line judged after its statistics arrived from a device).
bool rows_wanted(const Stats& stats, bool expecting);
bool rows_wanted(const Stats& stats);  // ... made just now

struct Rows {
  uint32_t extent = 0;  // the first dimension's size; 0: not measured
  uint32_t count = 0;   // rows holding a NaN or an Inf
  uint32_t first[OVF_ROWS_KEPT] = {};
  uint64_t nonfinite = 0;  // NaN/Inf values counted in all rows (not kept in the record)
};

// The rows of `view` (host memory) that hold a NaN/Inf; extent 0 where the
// tensor has no first dimension or more than kMaxRowsScanned rows.
Rows find_rows(const TensorView& view);

// Copies `rows` into the record's row fields.
void set_rows(ovf_record& r, const Rows& rows);

// An input whose only non-finite values are -inf is an additive mask more
// often than not (judged deliberate when the frame ends): its rows are not
// where a NaN came from, and it is not read again every batch.
inline bool mask_like_input(ovf_record_kind kind, const Stats& s) {
  return kind == OVF_KIND_INPUT && s.nan_count == 0 && s.pos_inf_count == 0;
}

// rows_wanted, then find_rows into `r`: what a builder of host lines calls.
inline void measure_rows_if_first(const TensorView& view, const Stats& stats, ovf_record& r) {
  if (rows_wanted(stats)) set_rows(r, find_rows(view));
}

}  // namespace ovf

#endif  // OVF_ROW_SCAN_H
