// The one response step (monitor.h): what the process does about an event
// without a debugger, and the report it prints.
#include <unistd.h>

#include "control.h"
#include "monitor.h"
#include "report.h"
#include "ring_writer.h"

namespace ovf {

std::string Monitor::report_text(uint64_t end, uint64_t batch) {
  return format_event_report(batch, report_floor_, end, ovf_state.max_frames_to_save,
                             session_start_);
}

Response Monitor::respond(uint32_t events, uint64_t end, uint64_t batch, bool can_raise) {
  Response out;
  out.events = events;
  const uint32_t on_event = effective_on_event();
  // Thresholds and traced frames are debugger stops; without one they only
  // mark the ring. Only NaN/Inf act on their own, as in the reference, and a
  // loss scaler that gave up (its gradients were NaN/Inf step after step),
  // and an early warning that was asked for.
  constexpr uint32_t kNonfinite = OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_BACKWARD | OVF_STOP_SCALER;
  if (on_event == OVF_ON_EVENT_CONTINUE || !(events & (kNonfinite | OVF_STOP_EARLY))) return out;
  // A warning comes before the NaN: warn and wait act again at the NaN itself.
  const bool warning = (events & kNonfinite) == 0;
  std::lock_guard<std::mutex> lock(response_mutex_);
  // A warning leaves the NaN's own answer as it would have been: its report
  // from the same frames, its response at the session's end.
  if (!warning) answered_ = true;
  switch (on_event) {
    case OVF_ON_EVENT_WARN:
      if (!acted_once_) out.text = report_text(end, batch);
      acted_once_ = acted_once_ || !warning;
      went_on_after_nonfinite_ = went_on_after_nonfinite_ || !warning;
      break;
    case OVF_ON_EVENT_ABORT:
      out.text = report_text(end, batch);
      out.action = Action::kAbort;
      out.message = warning ? abort_message("early warning, before any inf/nan") : abort_message();
      break;
    case OVF_ON_EVENT_WAIT:
      // Wait at the first event only: once released, every later frame carries
      // the same NaN onward and would stop again.
      if (!acted_once_) {
        // A release counts for the event waited on only, not one made before.
        *const_cast<volatile uint32_t*>(&ovf_state.control.wait_released) = 0;
        out.text = report_text(end, batch) + attach_instructions(getpid());
        out.action = Action::kWait;
      }
      acted_once_ = acted_once_ || !warning;
      break;
    default:  // raise
      if (can_raise) {
        out.text = report_text(end, batch);
        out.action = Action::kRaise;
        const ovf_record* event = warning ? find_record(end - 1) : nullptr;
        out.message = event != nullptr ? describe_early_warning(*event) : kOverflowMessage;
        if (event != nullptr) out.message.pop_back();  // its "\n"
      } else if (warning) {
        // Decided where nothing can raise (the session's end): said, not raised.
        out.text = report_text(end, batch);
      } else if (!raise_decided_) {
        // Once per forward: the backward pass goes on making non-finite
        // values after the first while the error is on its way.
        out.text = report_text(end, batch);
        raise_pending_ = raise_decided_ = true;
        raise_batch_ = batch;
      }
      break;
  }
  if (!warning) report_floor_ = end;
  return out;
}

Response Monitor::answer_unanswered_step() {
  Committed step;
  uint64_t batch;
  {
    std::lock_guard<std::mutex> lock(response_mutex_);
    step = unanswered_step_;
    batch = unanswered_step_batch_;
    unanswered_step_ = {0, 0, 0};
    if (answered_ || !step.events) return {};
  }
  return respond(step.events, step.end, batch, /*can_raise=*/false);
}

bool Monitor::went_on_after_nonfinite() {
  std::lock_guard<std::mutex> lock(response_mutex_);
  return went_on_after_nonfinite_;
}

bool Monitor::take_pending_raise(uint64_t* batch) {
  std::lock_guard<std::mutex> lock(response_mutex_);
  if (!raise_pending_) return false;
  raise_pending_ = false;
  *batch = raise_batch_;
  return true;
}

Response Monitor::respond_to_op(const ovf_record& r, uint32_t events) {
  return respond(events, r.seq + 1, r.batch, /*can_raise=*/false);
}

}  // namespace ovf
