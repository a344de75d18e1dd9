// The monitor's module frames: how a frame's lines are judged (masks,
// producer or carrier, the stop bits it raises), answered, and, for frames
// whose device statistics are on their way, deferred until they arrive.
#include <algorithm>

#include "control.h"
#include "monitor.h"
#include "monitor_lines.h"
#include "record.h"
#include "report.h"
#include "ring_writer.h"

namespace ovf {

// ---------------------------------------------------------------- the sources

// The first event's response leads; later ones add their text.
static void merge(Response& into, Response&& more) {
  if (into.action == Action::kNone) {
    // Events that only mark the ring (above, below, traced) do not hold back
    // one that acts.
    more.text = into.text + more.text;
    more.events |= into.events;
    into = std::move(more);
  } else {
    into.text += more.text;
  }
}

// A mask given to a module (an attention's additive mask of -inf, built as
// log(tril(ones)) by pytorch/examples' Transformer) is an input, not a fault:
// an input whose only non-finite values are -inf, in a frame whose outputs are
// all finite, was used as a mask. Flagged deliberate; the frame header keeps
// OVF_FLAG_NONFINITE only for what is left. A module that turns a mask into a
// NaN (softmax of a row masked whole) has a non-finite output and is judged as
// before, its mask input among the carried-in values.
static void flag_masks(std::vector<ovf_record>& records) {
  for (const ovf_record& r : records) {
    if (r.kind == OVF_KIND_OUTPUT && (r.flags & OVF_FLAG_NONFINITE)) return;
  }
  bool left = false;
  for (ovf_record& r : records) {
    if (r.kind == OVF_KIND_FRAME || !(r.flags & OVF_FLAG_NONFINITE)) continue;
    if (r.kind == OVF_KIND_INPUT && r.nan_count == 0 && r.pos_inf_count == 0) {
      r.flags |= OVF_FLAG_CONSTANT;
    } else if (!(r.flags & OVF_FLAG_CONSTANT)) {
      left = true;
    }
  }
  if (!left) records.front().flags &= ~uint32_t{OVF_FLAG_NONFINITE};
}

uint32_t Monitor::classify(std::vector<ovf_record>& records, const FrameContext& context) {
  uint32_t line_events = 0;
  bool output_nonfinite = false, carried_in = false;
  if (context.judge_masks) flag_masks(records);
  for (const ovf_record& r : records) {
    if (r.kind == OVF_KIND_FRAME || !(r.flags & OVF_FLAG_HAS_STATS) || r.numel == 0) continue;
    if (r.flags & OVF_FLAG_CONSTANT) continue;
    if (r.flags & OVF_FLAG_NONFINITE)
      (r.kind == OVF_KIND_OUTPUT ? output_nonfinite : carried_in) = true;
    line_events |= nonfinite_bits(r) | threshold_bits(r);
  }
  ovf_record& header = records.front();
  if (context.trace_mode) header.flags |= OVF_FLAG_TRACED;
  // A carrier got a NaN/Inf in (an input or weight). A producer made it from
  // finite inputs and weights itself: not one of its children or ops, so
  // nothing non-finite was recorded since its forward began (when known).
  const uint64_t last_nonfinite = __atomic_load_n(&last_nonfinite_seq_, __ATOMIC_ACQUIRE);
  const bool made_inside = context.forward_start != OVF_NO_SEQ && last_nonfinite != OVF_NO_SEQ &&
                           last_nonfinite >= context.forward_start;
  if (carried_in) {
    header.flags |= OVF_FLAG_CARRIER;
  } else if (output_nonfinite && !made_inside) {
    header.flags |= OVF_FLAG_PRODUCER;
  }

  // Which events the frame raises. Without a debugger the reference's rules
  // hold: NaN/Inf seen in a traced batch is remembered and reported at the
  // next untraced frame.
  const uint32_t nonfinite = line_events & (OVF_STOP_NAN | OVF_STOP_INF);
  uint32_t raw = line_events & (OVF_STOP_ABOVE | OVF_STOP_BELOW | OVF_STOP_CAST);
  if (context.trace_mode) raw |= OVF_STOP_TRACED;
  if (context.reference_prints) {
    pending_detection_ |= nonfinite;
    if (!context.trace_mode) {
      raw |= pending_detection_;
      pending_detection_ = 0;
    }
  } else {
    raw |= nonfinite;
  }
  return raw;
}

Response Monitor::answer_frame(const std::vector<ovf_record>& records, const FrameContext& context,
                               const Committed& done, bool can_raise, bool quiet) {
  Response out;
  if (quiet) return out;
  // The reference prints "<ctx> has nans/infs" while it builds the frame.
  if (context.reference_prints && (records.front().flags & OVF_FLAG_NONFINITE)) {
    for (const ovf_record& r : records) {
      if (counts_as_nonfinite(r)) out.text += nonfinite_text(r, interned(r.label_id));
    }
  }
  if (context.trace_mode) {
    // reset_saved_frames() then trace_frames(): only this frame, with the
    // batch markers written since the previous frame.
    if (context.reference_prints)
      out.text += format_frames(last_frames(context.previous_end, done.end, 1, nullptr)) + "\n";
    std::lock_guard<std::mutex> lock(response_mutex_);
    report_floor_ = done.end;
  }
  if (done.events) {
    // The header's batch_number is the reference's counter: for the root
    // module's own frame it already counts the batch that just ended. Counted
    // in training steps, it is the step the frame ran in, as on every line.
    const bool counted_here = context.is_root && !training_steps_;
    Response event =
        respond(done.events, done.end, context.batch + (counted_here ? 1 : 0), can_raise);
    out.text += event.text;
    out.action = event.action;
    out.message = event.message;
    out.events = done.events;
  }
  // Followed only while nothing acted: after a raise the frames were not meant to run.
  if (out.action == Action::kNone) merge(out, watch_growth(records, context.batch, can_raise));
  return out;
}

Response Monitor::finish_frame(FrameBuilder& frame) {
  const ovf_control& c = ovf_state.control;
  FrameContext context;
  context.batch = ovf_state.batch;
  context.trace_mode = in_trace_batch(context.batch);
  context.reference_prints = read_control(c.on_event) != OVF_ON_EVENT_CONTINUE;
  context.is_root = frame.is_root();
  context.judge_masks = frame.judges_masks();
  context.forward_start = frame.forward_start();
  context.previous_end = last_frame_end_;
  context.boundary = boundaries_;

  if (total_calls_ == 0) append_batch_marker(context.batch);
  ++total_calls_;

  auto& records = frame.records();
  PendingLines& pending = frame.pending();
  if (!pending.empty()) {
    pending.batch->submit();
    // Exact mode: the one synchronisation of this frame (none possible while a
    // CUDA graph is captured: the frame then waits with the others).
    if (ovf_state.device_mode == OVF_DEVICE_MODE_EXACT && pending.batch->wait()) {
      pending.fill(records.data());
      pending.clear();
    }
  }
  // Counted before the commit: a debugger stopped in it numbers this frame.
  ++ovf_state.frames_written;
  ++frames_this_batch_;
  Response out;
  Committed done{};
  std::lock_guard<std::recursive_mutex> lock(deferred_mutex_);
  if (pending.empty() && deferred_.empty()) {
    const uint32_t raw = classify(records, context);
    const ovf_record& header = records.front();
    done = commit(records.data(), static_cast<uint32_t>(records.size()),
                  {context.batch, raw, (header.flags & OVF_FLAG_PRODUCER) != 0, header.name_id});
  } else {
    // Appended now, in the order frames ran; judged when its statistics arrive.
    done = append(records.data(), static_cast<uint32_t>(records.size()), context.batch);
    deferred_.push_back({records, std::move(pending), context});
    pending.clear();
  }
  if (frame.is_root()) {
    if (!training_steps_) {  // the reference's count (training steps end elsewhere)
      end_batch();
      between_batches_.store(true, std::memory_order_release);
    }
    ++boundaries_;
  }
  last_frame_end_ = done.end;
  if (deferred_.empty()) {
    out = answer_frame(records, context, done, /*can_raise=*/true, /*quiet=*/false);
  } else {
    // At a batch boundary, wait for what ran before the previous one: a stop
    // comes at most one batch late.
    out = drain(frame.is_root() ? boundaries_ - 1 : 0, /*can_raise=*/true, done.end, false);
  }

  const int64_t abort_after = read_control(c.abort_after_batch);
  if (out.action == Action::kNone && abort_after >= 0 &&
      static_cast<int64_t>(ovf_state.batch) > abort_after) {
    if (read_control(c.stop_mask) & OVF_STOP_ABORT_AFTER) {
      ovf_state.last_event_seq = done.first;
      ovf_state.last_event_kind = OVF_STOP_ABORT_AFTER;
      ovf_state.last_event_late = 0;
      reach_stop_hook(find_record(done.first), OVF_STOP_ABORT_AFTER);
    }
    out.action = Action::kRaise;
    out.events |= OVF_STOP_ABORT_AFTER;
    out.message = "DebugUnderflowOverflow: aborting after " + std::to_string(ovf_state.batch) +
                  " batches due to `abort_after_batch_num=" + std::to_string(abort_after) + "` arg";
  }
  return out;
}

// ---------------------------------------------------------------- deferred frames

Response Monitor::judge_deferred(DeferredFrame& frame, bool can_raise, bool quiet) {
  auto& records = frame.records;
  const uint32_t raw = classify(records, frame.context);
  // The ring gets the arrived statistics and flags in place, under the
  // sequence numbers the frame was given when it ran.
  for (const ovf_record& r : records) rewrite_record(r);
  const ovf_record& header = records.front();
  Committed done{header.seq, header.seq + records.size(), 0};
  done.events =
      detect(done, records.data(), static_cast<uint32_t>(records.size()),
             {frame.context.batch, raw, (header.flags & OVF_FLAG_PRODUCER) != 0, header.name_id});
  return answer_frame(records, frame.context, done, can_raise, quiet);
}

Response Monitor::drain(uint64_t wait_before, bool can_raise, uint64_t own_end, bool quiet) {
  Response out;
  while (!deferred_.empty()) {
    DeferredFrame& front = deferred_.front();
    if (!front.pending.empty()) {
      const bool arrived = front.context.boundary < wait_before ? front.pending.batch->wait()
                                                                : front.pending.batch->ready();
      if (!arrived) break;
      front.pending.fill(front.records.data());
      front.pending.clear();
    }
    DeferredFrame frame = std::move(front);
    deferred_.pop_front();
    count_pending();  // what a debugger stopped in this frame's judgement reads
    // Late: its own hook has returned (it is not the frame that just finished).
    judging_late_ = frame.records.front().seq + frame.records.size() != own_end;
    // Once an event acted (raise, abort, wait), the frames after it would not
    // have run had it been seen in time: recorded and judged, never answered.
    merge(out, judge_deferred(frame, can_raise, quiet || out.action != Action::kNone));
    judging_late_ = false;
  }
  count_pending();
  return out;
}

void Monitor::count_pending() {
  uint32_t waiting = 0;
  for (const DeferredFrame& f : deferred_) waiting += f.pending.empty() ? 0 : 1;
  ovf_state.pending_frames = waiting;
  deferred_count_.store(deferred_.size(), std::memory_order_release);
}

Response Monitor::poll_device_frames(bool can_raise) {
  if (deferred_count_.load(std::memory_order_acquire) == 0) return {};
  std::lock_guard<std::recursive_mutex> lock(deferred_mutex_);
  return drain(0, can_raise, 0, false);
}

Response Monitor::flush_device_frames(bool can_raise) {
  if (deferred_count_.load(std::memory_order_acquire) == 0) return {};
  std::lock_guard<std::recursive_mutex> lock(deferred_mutex_);
  // What a session that already answered an event still had on its way is
  // recorded, not answered again (it ran after the event).
  bool answered;
  {
    std::lock_guard<std::mutex> response_lock(response_mutex_);
    answered = answered_;
  }
  return drain(UINT64_MAX, can_raise, 0, answered);
}

}  // namespace ovf
