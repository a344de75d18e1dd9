// Loss scalers (GradScaler): a skipped step or a change of scale becomes a
// SCALER record; a scaler that keeps skipping is an event (monitor.h).
#include "control.h"
#include "monitor.h"
#include "record.h"

namespace ovf {

Response Monitor::scaler_update(const ScalerUpdate& u, bool can_raise) {
  // What the scaled backward made non-finite belongs to this update, skip or not.
  const uint64_t cause = expected_cause_seq_.exchange(OVF_NO_SEQ);
  if (!active_) return {};
  uint32_t skips = 0;
  {
    std::lock_guard<std::mutex> lock(response_mutex_);
    skips = skips_in_row_ = u.skipped ? skips_in_row_ + 1 : 0;
  }
  if (!u.skipped && u.scale_after == u.scale_before) return {};  // a step like any other
  ovf_record r = blank_record(OVF_KIND_SCALER);
  r.name_id = u.class_id;
  r.label_id = u.parameter_id;
  r.scale_before = u.scale_before;
  r.scale_after = u.scale_after;
  r.skips_in_row = skips;
  // A skip is the scaler at work: non-finite, deliberate, no first value.
  if (u.skipped) {
    r.flags = OVF_FLAG_NONFINITE | OVF_FLAG_CONSTANT | OVF_FLAG_EXPECTED;
    r.cause_seq = cause;
  }
  // It gives up once: at the skip that makes the run long enough, or that takes
  // the scale below the floor.
  const ovf_control& c = ovf_state.control;
  const uint32_t max_skips = read_control(c.scaler_max_skips);
  const double floor = read_control(c.scale_floor);
  const bool too_many = max_skips != 0 && skips == max_skips;
  const bool too_low = floor > 0 && u.skipped && u.scale_after < floor && u.scale_before >= floor;
  const uint32_t raw = too_many || too_low ? uint32_t{OVF_STOP_SCALER} : 0u;
  const Committed done = commit(&r, 1, {record_batch(), raw, /*producer=*/true, OVF_NO_ID});
  if (done.events == 0) return {};
  return respond(done.events, done.end, r.batch, can_raise);
}

}  // namespace ovf
