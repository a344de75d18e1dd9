// The replay of a step at a module event, or of an optimizer's step at its event
// (monitor.h: set_replay_hook): the monitor's half. The driver runs the forward (the
// optimizer's step) again; here its records are kept apart from the run's (flagged,
// deciding nothing) and its outcome lands in the event's FRAME (STEP), where the
// report, the debuggers and cores read it. Then, at a module event's stop, a debugger
// may step into the replayed step (set_step_hook).
#include "control.h"
#include "monitor.h"
#include "record.h"
#include "response.h"
#include "ring_writer.h"
#include "snapshot.h"

namespace ovf {

void Monitor::replay_if_due(const Committed& span, const ovf_record* records, uint32_t events,
                            bool holds_first) {
  const ReplayHook hook = replay_hook_.load(std::memory_order_acquire);
  // Only the frame that holds the session's first value: it made it, or got it
  // from code between modules (a functional softmax in its parent's forward);
  // later frames would replay into an op already named. With ops observed
  // (--ops) the op was seen already.
  if (hook == nullptr || !(events & (OVF_STOP_NAN | OVF_STOP_INF)) || !holds_first ||
      (records[0].kind != OVF_KIND_FRAME && records[0].kind != OVF_KIND_STEP) ||
      (read_control(ovf_state.control.observe) & OVF_OBSERVE_OPS) || replayed_.exchange(true)) {
    return;
  }
  hook(span.first, records[0].batch, (records[0].flags & OVF_FLAG_COMPILED) != 0);
}

void Monitor::begin_replay() {
  replay_producer_.store(OVF_NO_SEQ);
  replaying_.store(true, std::memory_order_release);
}

void Monitor::note_replayed(const Committed& span, const ovf_record* records, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t f = records[i].flags;
    if ((f & OVF_FLAG_NONFINITE) && (f & OVF_FLAG_PRODUCER) && !(f & OVF_FLAG_CONSTANT)) {
      uint64_t none = OVF_NO_SEQ;
      replay_producer_.compare_exchange_strong(none, span.first + i);
      return;
    }
  }
}

void Monitor::end_replay(uint64_t frame_seq, const std::string& said) {
  replaying_.store(false, std::memory_order_release);
  const uint64_t producer = replay_producer_.exchange(OVF_NO_SEQ);
  const ovf_record* found = find_record(frame_seq);
  if (found == nullptr) return;
  // The FRAME was published before the stop hook, which no debugger has reached yet.
  ovf_record frame = *found;
  frame.cause_seq = producer;
  frame.verdict_id = said.empty() ? OVF_NO_ID : intern(said);
  rewrite_record(frame);
}

void Monitor::end_replay_pass() {
  replaying_.store(false, std::memory_order_release);
  replay_producer_.store(OVF_NO_SEQ);
}

namespace {

// The event's replay named the op that made its value: there is a call to step into.
bool replay_named_op(uint64_t frame_seq) {
  const ovf_record* frame = find_record(frame_seq);
  if (frame == nullptr || frame->kind != OVF_KIND_FRAME) return false;
  const ovf_record* producer = find_record(frame->cause_seq);
  return producer != nullptr && (producer->flags & OVF_FLAG_REPLAY);
}

void set_step_state(uint32_t state, const std::string& where) {
  ovf_state.step_where_id = where.empty() ? OVF_NO_ID : intern(where);
  ovf_state.step_state = state;
}

}  // namespace

void Monitor::stop_and_step(uint64_t frame_seq, uint32_t events) {
  const StepHook hook = step_hook_.load(std::memory_order_acquire);
  const bool steppable = hook != nullptr && replay_named_op(frame_seq);
  ovf_state.control.step_request = OVF_STEP_NONE;
  set_step_state(steppable ? OVF_STEPPING_AT_EVENT : OVF_STEPPING_NONE, "");
  reach_stop_hook(find_record(frame_seq), events);
  // The debugger asked, at this stop, to step into the replayed step: each time,
  // one more pass (its stops are the driver's), then this stop again.
  while (read_control(ovf_state.control.step_request) == OVF_STEP_INTO) {
    ovf_state.control.step_request = OVF_STEP_NONE;
    if (steppable) {
      const std::string said = hook(frame_seq);
      set_step_state(OVF_STEPPING_ENDED, said);
      take_snapshot(frame_seq);  // the event's stack and locals again, not the last line's
    } else {
      const ovf_record* head = find_record(frame_seq);
      set_step_state(OVF_STEPPING_REFUSED,
                     head != nullptr && head->kind == OVF_KIND_STEP
                         ? "the value was written by an optimizer's step, not in a module's "
                           "forward: nothing to step into"
                         : "no replay named the op that made this event's value: nothing to "
                           "step into");
    }
    reach_stop_hook(find_record(frame_seq), events);
  }
  ovf_state.control.step_request = OVF_STEP_NONE;
  set_step_state(OVF_STEPPING_NONE, "");
}

}  // namespace ovf
