#include "record.h"

#include <algorithm>
#include <cstring>

namespace ovf {

ovf_record blank_record(ovf_record_kind kind) {
  ovf_record r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  r.frame_seq = OVF_NO_SEQ;
  r.context_id = OVF_NO_ID;
  r.aux_id = OVF_NO_ID;
  r.diagnosis_id = OVF_NO_ID;
  r.location_id = OVF_NO_ID;
  r.verdict_id = OVF_NO_ID;
  r.cause_seq = OVF_NO_SEQ;
  r.device_index = -1;
  return r;
}

ovf_record make_line(ovf_record_kind kind, uint32_t label_id, const Stats& s, ovf_dtype dtype,
                     DeviceId device, uint32_t flags) {
  ovf_record r = blank_record(kind);
  r.label_id = label_id;
  r.dtype = dtype;
  r.device_type = device.type;
  r.device_index = device.index;
  r.flags = flags;
  set_stats(r, s);
  return r;
}

void set_stats(ovf_record& r, const Stats& s) {
  r.flags &= ~uint32_t{OVF_FLAG_HAS_STATS | OVF_FLAG_EMPTY | OVF_FLAG_NONFINITE | OVF_FLAG_CAST};
  if (s.has_stats) {
    r.flags |= OVF_FLAG_HAS_STATS;
    if (s.numel == 0) r.flags |= OVF_FLAG_EMPTY;
    if (s.nonfinite()) r.flags |= OVF_FLAG_NONFINITE;
    if (s.has_cast) r.flags |= OVF_FLAG_CAST;
  }
  for (int k = 0; k < kCastCounts; ++k)
    r.cast_counts[k] = static_cast<uint32_t>(std::min<uint64_t>(s.cast.n[k], UINT32_MAX));
  r.numel = s.numel;
  r.nan_count = s.nan_count;
  r.pos_inf_count = s.pos_inf_count;
  r.neg_inf_count = s.neg_inf_count;
  r.zero_count = s.zero_count;
  r.subnormal_count = s.subnormal_count;
  r.abs_min = s.abs_min;
  r.abs_max = s.abs_max;
  r.abs_min_nonzero = s.abs_min_nonzero;
}

ovf_record make_value_line(ovf_record_kind kind, uint32_t label_id, uint32_t flags) {
  ovf_record r = blank_record(kind);
  r.label_id = label_id;
  r.flags = flags;
  return r;
}

}  // namespace ovf
