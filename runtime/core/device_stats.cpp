#include "device_stats.h"

#include "record.h"

namespace ovf {

void PendingLines::fill(ovf_record* records) const {
  ovf_record& frame = records[0];
  for (const Line& line : lines) {
    ovf_record& r = records[line.record];
    Stats s = batch->result(line.result);
    if (!s.has_stats) {
      r.flags |= OVF_FLAG_NO_DATA;  // the device failed: said, never a wrong number
      s = Stats{};
      s.numel = r.numel;
    }
    r.flags &= ~uint32_t{OVF_FLAG_PENDING};
    set_stats(r, s);
    if (r.headroom_dtype != OVF_DTYPE_UNKNOWN) {
      const uint64_t underflow = batch->underflow(line.result);
      r.headroom_underflow = underflow > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(underflow);
    }
    if (!mask_like_input(static_cast<ovf_record_kind>(r.kind), s) && rows_wanted(s, line.expecting))
      set_rows(r, batch->rows(line.result));
    if (r.flags & OVF_FLAG_NONFINITE) frame.flags |= OVF_FLAG_NONFINITE;
  }
  frame.flags &= ~uint32_t{OVF_FLAG_PENDING};
}

}  // namespace ovf
