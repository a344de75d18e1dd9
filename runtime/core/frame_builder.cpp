#include "frame_builder.h"

#include <algorithm>

#include "control.h"
#include "monitor.h"
#include "row_scan.h"
#include "stats_cpu.h"

namespace ovf {

void FrameBuilder::begin(uint32_t module_name_id, uint32_t class_name_id, bool is_root,
                         uint64_t forward_start, uint32_t frame_flags) {
  records_.clear();
  pending_.clear();
  is_root_ = is_root;
  inputs_may_be_masks_ = false;
  forward_start_ = forward_start;
  ovf_record frame = blank_record(OVF_KIND_FRAME);
  frame.name_id = module_name_id;
  frame.label_id = class_name_id;
  frame.flags = (is_root ? OVF_FLAG_ROOT : 0) | frame_flags;
  records_.push_back(frame);
}

void FrameBuilder::add_line(const ovf_record& line) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return;
  }
  records_.push_back(line);
  if (line.flags & OVF_FLAG_NONFINITE) records_.front().flags |= OVF_FLAG_NONFINITE;
}

Stats FrameBuilder::add_tensor(ovf_record_kind kind, uint32_t label_id, const TensorView& view,
                               DeviceId device, const Stats* known) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return Stats{};
  }
  const Stats stats = known != nullptr ? *known : compute_stats_cpu(view, cast_counts_asked());
  add_stats(kind, label_id, stats, view.dtype, device);
  if (!mask_like_input(kind, stats)) measure_rows_if_first(view, stats, records_.back());
  const ovf_dtype against = headroom_dtype();
  if (against != OVF_DTYPE_UNKNOWN) set_headroom(against, headroom_underflow(view, against));
  return stats;
}

void FrameBuilder::add_stats(ovf_record_kind kind, uint32_t label_id, const Stats& s,
                             ovf_dtype dtype, DeviceId device, uint32_t extra_flags) {
  add_line(make_line(kind, label_id, s, dtype, device, extra_flags));
}

void FrameBuilder::add_pending(ovf_record_kind kind, uint32_t label_id, ovf_dtype dtype,
                               DeviceId device, uint64_t numel,
                               const std::shared_ptr<DeviceStatsBatch>& batch, int index) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return;
  }
  Stats none;
  none.numel = numel;
  ovf_record line = make_line(kind, label_id, none, dtype, device, OVF_FLAG_PENDING);
  const ovf_dtype against = headroom_dtype();
  if (against != OVF_DTYPE_UNKNOWN) line.headroom_dtype = against;
  pending_.batch = batch;
  pending_.lines.push_back(
      {static_cast<uint32_t>(records_.size()), index, Monitor::instance().expecting_nonfinite()});
  records_.push_back(line);
  records_.front().flags |= OVF_FLAG_PENDING;
}

void FrameBuilder::add_value(ovf_record_kind what, uint32_t label_id, uint32_t flags) {
  add_line(make_value_line(what, label_id, flags));
}

void FrameBuilder::set_headroom(ovf_dtype against, uint64_t underflow) {
  if (records_.size() < 2) return;
  ovf_record& r = records_.back();
  r.headroom_dtype = against;
  r.headroom_underflow = static_cast<uint32_t>(std::min<uint64_t>(underflow, UINT32_MAX));
}

ovf_dtype headroom_dtype() {
  const auto d = static_cast<ovf_dtype>(read_control(ovf_state.control.headroom_dtype));
  return dtype_max(d) > 0 ? d : OVF_DTYPE_UNKNOWN;
}

bool cast_counts_asked() {
  return (read_control(ovf_state.control.observe) & OVF_OBSERVE_CAST) != 0;
}

uint64_t headroom_underflow(const TensorView& view, ovf_dtype against) {
  return count_below(view, dtype_min_normal(against));
}

}  // namespace ovf
