// Early warnings: the run heads for a NaN/Inf it has not made yet (monitor.h).
#include "control.h"
#include "monitor.h"
#include "record.h"
#include "stats.h"

namespace ovf {

Response Monitor::watch_growth(const std::vector<ovf_record>& records, uint64_t batch,
                               bool can_raise) {
  const uint32_t horizon = read_control(ovf_state.control.early_horizon);
  if (horizon == 0 || warned_early_.load(std::memory_order_relaxed)) return {};
  // The output nearest its dtype's limit speaks for the module: its abs max as
  // a share of that limit is what grows toward 1.
  const ovf_record* nearest = nullptr;
  double share = 0, limit = 0;
  for (const ovf_record& r : records) {
    if (r.kind != OVF_KIND_OUTPUT || (r.flags & OVF_FLAG_HAS_STATS) == 0 || r.numel == 0 ||
        (r.flags & (OVF_FLAG_NONFINITE | OVF_FLAG_CONSTANT)) != 0) {
      continue;
    }
    const double top = dtype_max(static_cast<ovf_dtype>(r.dtype));
    if (top > 0 && r.abs_max / top >= share) {
      nearest = &r;
      share = r.abs_max / top;
      limit = top;
    }
  }
  if (nearest == nullptr) return {};
  const ovf_record& frame = records.front();
  GrowthWatch::Forecast f;
  if (!growth_.observe(frame.name_id, batch, share, 1.0, horizon, &f)) return {};
  ovf_record w = blank_record(OVF_KIND_WARNING);
  w.name_id = frame.name_id;
  w.label_id = frame.label_id;
  w.dtype = nearest->dtype;
  w.abs_max = f.now * limit;
  w.scale_before = f.previous * limit;
  w.scale_after = limit;
  w.skips_in_row = f.batches_left;
  w.cause_seq = frame.seq;
  return warn_early(w, batch, frame.name_id, can_raise);
}

Response Monitor::update_ratio(const UpdateRatio& u, bool can_raise) {
  if (!active_ || warned_early_.load(std::memory_order_relaxed)) return {};
  const double most = read_control(ovf_state.control.update_ratio_max);
  if (!(most > 0) || !(u.ratio > most)) return {};  // off, or a NaN ratio (the step's own check)
  ovf_record w = blank_record(OVF_KIND_WARNING);
  w.name_id = u.class_id;
  w.label_id = u.parameter_id;
  w.abs_max = u.ratio;
  w.scale_before = u.parameter_ratio;
  w.scale_after = most;
  return warn_early(w, record_batch(), OVF_NO_ID, can_raise);
}

Response Monitor::warn_early(ovf_record& w, uint64_t batch, uint32_t module_id, bool can_raise) {
  // The session's first warning that the filters let through: one they drop
  // (--after-batch, --module) leaves the next its chance.
  if (static_cast<int64_t>(batch) < read_control(ovf_state.control.after_batch) ||
      !module_matches(module_id)) {
    return {};
  }
  if (warned_early_.exchange(true)) return {};
  w.flags |= OVF_FLAG_HAS_STATS;
  const Committed done = commit(&w, 1, {batch, OVF_STOP_EARLY, /*producer=*/true, module_id});
  if (done.events == 0) return {};
  return respond(done.events, done.end, batch, can_raise);
}

}  // namespace ovf
