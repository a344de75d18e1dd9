#include "row_scan.h"

#include "monitor.h"
#include "stats_cpu.h"

namespace ovf {

bool rows_wanted(const Stats& stats, bool expecting) {
  // Inside an expected region (a loss scaler's probe) infinities are deliberate:
  // no first value comes of them, and a step of them would be read twice.
  return stats.has_stats && stats.nonfinite() && !expecting &&
         __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE) == OVF_NO_SEQ;
}

bool rows_wanted(const Stats& stats) {
  return rows_wanted(stats, Monitor::instance().expecting_nonfinite());
}

Rows find_rows(const TensorView& view) {
  Rows found;
  if (view.ndim < 1 || view.sizes[0] < 1 || view.sizes[0] > kMaxRowsScanned) return found;
  const int64_t step = view.strides[0] * dtype_size(view.dtype);
  TensorView row = view;
  row.ndim = view.ndim - 1;
  row.sizes = view.sizes + 1;
  row.strides = view.strides + 1;
  for (int64_t i = 0; i < view.sizes[0]; ++i) {
    row.data = static_cast<const char*>(view.data) + i * step;
    const uint64_t nonfinite = compute_stats_cpu(row).nonfinite_count();
    if (nonfinite == 0) continue;
    found.nonfinite += nonfinite;
    if (found.count < OVF_ROWS_KEPT) found.first[found.count] = static_cast<uint32_t>(i);
    ++found.count;
  }
  found.extent = static_cast<uint32_t>(view.sizes[0]);
  return found;
}

void set_rows(ovf_record& r, const Rows& rows) {
  r.row_extent = rows.extent;
  r.row_count = rows.count;
  for (uint32_t i = 0; i < OVF_ROWS_KEPT; ++i) r.rows[i] = rows.first[i];
}

}  // namespace ovf
