// The one line builder: every source of records (module frames, ops, gradients,
// checkpoints, optimizer steps) fills a record's statistics and flags here.
#ifndef OVF_RECORD_H
#define OVF_RECORD_H

#include <cstdint>

#include "ovf/ring.h"
#include "stats.h"

namespace ovf {

constexpr uint8_t kCudaDeviceType = 1;  // ovf_record::device_type

struct DeviceId {
  uint8_t type = 0;  // 0 cpu, 1 (kCudaDeviceType) cuda, 255 other
  int8_t index = -1;
};

// A zeroed record of `kind`: no frame (frame_seq OVF_NO_SEQ: the commit makes
// it its own frame), no module (context_id, aux_id OVF_NO_ID), no device index.
ovf_record blank_record(ovf_record_kind kind);

// A line with statistics: kind, label, dtype, device, the stats fields, and the
// flags they imply (HAS_STATS, EMPTY, NONFINITE) on top of `flags`.
ovf_record make_line(ovf_record_kind kind, uint32_t label_id, const Stats& stats, ovf_dtype dtype,
                     DeviceId device, uint32_t flags = 0);

// The stats fields of `r` and the flags they imply (HAS_STATS, EMPTY,
// NONFINITE), replacing what it held: make_line's half that a line whose
// statistics arrive later (device_stats.h) needs too.
void set_stats(ovf_record& r, const Stats& stats);

// A line without statistics: OVF_KIND_NONE, OVF_KIND_NOT_TENSOR, or a tensor
// kind with OVF_FLAG_NO_DATA (memory this process cannot read).
ovf_record make_value_line(ovf_record_kind kind, uint32_t label_id, uint32_t flags = 0);

// Whether a line counts as non-finite for the first-value bookkeeping: a
// NaN/Inf that is not deliberate (OVF_FLAG_CONSTANT: masks, expected regions).
inline bool counts_as_nonfinite(const ovf_record& r) {
  return (r.flags & OVF_FLAG_NONFINITE) && !(r.flags & OVF_FLAG_CONSTANT) &&
         r.kind != OVF_KIND_FRAME && r.kind != OVF_KIND_STEP;
}

// The NaN / Inf stop bits a line's counts raise.
inline uint32_t nonfinite_bits(const ovf_record& r) {
  return (r.nan_count ? uint32_t{OVF_STOP_NAN} : 0u) |
         (r.pos_inf_count + r.neg_inf_count ? uint32_t{OVF_STOP_INF} : 0u);
}

}  // namespace ovf

#endif  // OVF_RECORD_H
