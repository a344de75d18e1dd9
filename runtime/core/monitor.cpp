#include "monitor.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cast_loss.h"
#include "control.h"
#include "event_summary.h"
#include "monitor_lines.h"
#include "record.h"
#include "report.h"
#include "ring_writer.h"
#include "sample_log.h"
#include "snapshot.h"

namespace ovf {

void append_batch_marker(uint64_t batch) {
  ovf_record marker = blank_record(OVF_KIND_BATCH_START);
  marker.batch = batch;
  marker.timestamp_ns = now_ns();
  append_records(&marker, 1);
}

// The ABOVE / BELOW stop bits a floating line's magnitudes raise.
uint32_t threshold_bits(const ovf_record& r) {
  if (!is_floating(static_cast<ovf_dtype>(r.dtype))) return 0;
  const ovf_control& c = ovf_state.control;
  return (r.abs_max > read_control(c.above) ? uint32_t{OVF_STOP_ABOVE} : 0u) |
         (r.abs_min_nonzero < read_control(c.below) ? uint32_t{OVF_STOP_BELOW} : 0u) |
         (cast_loss_over_limit(r, c) >= 0 ? uint32_t{OVF_STOP_CAST} : 0u);
}

// The "<label> has nans" / "has infs" lines the reference prints for a line.
std::string nonfinite_text(const ovf_record& r, std::string_view label) {
  const std::string escaped = escape_text(label);
  std::string out;
  if (r.nan_count) out += escaped + " has nans\n";
  if (r.pos_inf_count + r.neg_inf_count) out += escaped + " has infs\n";
  return out;
}

Monitor& Monitor::instance() {
  static Monitor* monitor = new Monitor();  // never destroyed: hooks may run during exit
  return *monitor;
}

// ---------------------------------------------------------------- sessions

std::string Monitor::start_session(const SessionOptions& o) {
  if (o.max_frames_to_save == 0) return "max_frames_to_save must be at least 1";
  for (int64_t b : o.trace_batch_nums) {
    if (b < 0) return "trace_batch_nums must hold batch numbers >= 0 (batches are 0-indexed)";
  }
  const std::string refused = take_load_refusal();
  if (!refused.empty()) std::fprintf(stderr, "%s\n", refused.c_str());
  ovf_control& c = ovf_state.control;
  // A session starts from the reference's behaviour: whatever an earlier
  // session or a debugger set (stop bits, filters, thresholds, ops) is reset.
  c.stop_mask = OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_SCALER;
  c.scaler_max_skips = 0;
  // A loss scale below 1 shrinks the loss: only a scaler whose every step for
  // log2(initial scale) steps overflowed gets there (its gradients are NaN).
  c.scale_floor = 1.0;
  c.early_horizon = 0;  // early warnings are asked for (--early)
  c.update_ratio_max = 0;
  c.above = __builtin_inf();
  c.below = 0;
  c.after_batch = 0;
  std::memset(c.module_glob, 0, OVF_GLOB_SIZE);
  c.observe = 0;
  c.headroom_dtype = 0;
  c.cast_target = 0;
  c.cast_overflow_max = c.cast_flush_max = c.cast_subnormal_max = -1;  // off
  // The control block shows a debugger the first OVF_MAX_TRACE_BATCHES; the
  // reference takes any number, kept here (in_trace_batch).
  trace_batches_ = o.trace_batch_nums;
  const size_t shown = std::min<size_t>(trace_batches_.size(), OVF_MAX_TRACE_BATCHES);
  c.trace_count = static_cast<uint32_t>(shown);
  std::copy(trace_batches_.begin(), trace_batches_.begin() + shown, c.trace_batches);
  c.abort_after_batch = o.abort_after_batch_num;
  c.on_event = o.on_event;
  ovf_state.own_on_event = o.on_event;
  c.enabled = 1;
  c.generation++;
  ovf_state.max_frames_to_save = o.max_frames_to_save;
  ovf_state.batch = 0;
  ovf_state.detection_state = 1;
  // "The first non-finite value" is this session's: an earlier one's is history.
  __atomic_store_n(&ovf_state.first_nonfinite_seq, OVF_NO_SEQ, __ATOMIC_RELEASE);
  __atomic_store_n(&last_nonfinite_seq_, OVF_NO_SEQ, __ATOMIC_RELEASE);
  replayed_.store(false);
  clear_batch_samples();  // batch numbers start again at 0
  total_calls_ = 0;
  {
    std::lock_guard<std::recursive_mutex> lock(deferred_mutex_);
    deferred_.clear();  // an earlier session's frames are its own (stop_session flushed them)
    growth_.clear();
    deferred_count_.store(0, std::memory_order_release);
    boundaries_ = 0;
  }
  ovf_state.device_mode = o.device_mode;
  ovf_state.pending_frames = 0;
  ovf_state.last_event_late = 0;
  last_frame_end_ = session_start_ = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
  pending_detection_ = 0;
  frames_this_batch_ = 0;
  between_batches_.store(false, std::memory_order_release);
  training_steps_ = o.count_training_steps;
  {
    std::lock_guard<std::mutex> lock(step_mutex_);
    step_clock_.reset();
    guessed_steps_ = 0;
  }
  {
    std::lock_guard<std::mutex> lock(response_mutex_);
    report_floor_ = last_frame_end_;
    acted_once_ = false;
    answered_ = false;
    raise_pending_ = raise_decided_ = false;
    unanswered_step_ = {0, 0, 0};
    skips_in_row_ = 0;
  }
  expected_cause_seq_.store(OVF_NO_SEQ);
  warned_early_.store(false);
  active_ = true;
  return "";
}

void Monitor::stop_session() {
  // Drivers flush first (flush_device_frames) to act on what arrives; what
  // still waits now is judged without a response.
  flush_device_frames(/*can_raise=*/false);
  active_ = false;
  ovf_state.detection_state = ovf_state.first_nonfinite_seq == OVF_NO_SEQ ? 0 : 2;
  std::lock_guard<std::mutex> lock(response_mutex_);
  raise_pending_ = false;
}

bool Monitor::in_trace_batch(uint64_t batch) const {
  const ovf_control& c = ovf_state.control;
  const uint32_t n = std::min<uint32_t>(read_control(c.trace_count), OVF_MAX_TRACE_BATCHES);
  // The session's own list, unless a debugger has written another one.
  bool session_list = n == std::min<size_t>(trace_batches_.size(), OVF_MAX_TRACE_BATCHES);
  for (uint32_t i = 0; i < n && session_list; ++i) {
    session_list = read_control(c.trace_batches[i]) == trace_batches_[i];
  }
  if (session_list) {
    return std::find(trace_batches_.begin(), trace_batches_.end(), static_cast<int64_t>(batch)) !=
           trace_batches_.end();
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (read_control(c.trace_batches[i]) == static_cast<int64_t>(batch)) return true;
  }
  return false;
}

bool Monitor::module_matches(uint32_t name_id) {
  const ovf_control& c = ovf_state.control;
  if (read_control(c.module_glob[0]) == '\0') return true;
  if (name_id == OVF_NO_ID) return false;
  std::lock_guard<std::mutex> lock(glob_mutex_);
  const uint32_t generation = read_control(c.generation) + 1;
  if (name_id >= glob_cache_.size()) glob_cache_.resize(name_id + 1, {0, false});
  auto& entry = glob_cache_[name_id];
  if (entry.first != generation) {
    char pattern[OVF_GLOB_SIZE];
    std::memcpy(pattern, const_cast<const char*>(c.module_glob), OVF_GLOB_SIZE);
    pattern[OVF_GLOB_SIZE - 1] = '\0';
    const std::string name(interned(name_id));
    entry = {generation, fnmatch(pattern, name.c_str(), 0) == 0};
  }
  return entry.second;
}

// The batch rule, for every record that is not a module frame: a record
// belongs to the batch whose forward, loss, backward or optimizer step is
// running. The reference's counter (ovf_state.batch) advances when the root
// module's forward ends; until the next root forward begins, what runs (the
// loss, the backward pass, the step) still belongs to the batch it counted.
// Programs without a root forward (the C++ API) end batches with end_batch().
uint64_t Monitor::record_batch() const {
  const uint64_t counter = ovf_state.batch;
  return between_batches_.load(std::memory_order_acquire) && counter > 0 ? counter - 1 : counter;
}

void Monitor::begin_root_forward() {
  between_batches_.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(response_mutex_);
  raise_decided_ = false;
}

void Monitor::begin_step_root_forward(uint32_t root_id, bool grad_enabled, uint32_t call_site) {
  if (!training_steps_) return;
  std::lock_guard<std::mutex> lock(step_mutex_);
  const StepClock::Begins begins = step_clock_.begins_step(root_id, grad_enabled, call_site);
  if (begins == StepClock::Begins::kNo) return;
  if (begins == StepClock::Begins::kGuessed && guessed_steps_++ == 0) {
    first_guess_seq_ = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
  }
  end_batch();
}

void Monitor::set_step_end(StepEnd rule) {
  std::lock_guard<std::mutex> lock(step_mutex_);
  // The program calls backward(): the forwards before it were one step.
  if (step_clock_.step_end() == StepEnd::kRepeatedForward && rule != StepEnd::kRepeatedForward)
    undo_guessed_steps();
  step_clock_.set_step_end(rule);
}

void Monitor::undo_guessed_steps() {
  if (guessed_steps_ == 0) return;
  const uint64_t batch = ovf_state.batch - std::min<uint64_t>(guessed_steps_, ovf_state.batch);
  const uint64_t end = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
  for (uint64_t seq = first_guess_seq_; seq < end; ++seq) {
    const ovf_record* r = find_record(seq);
    if (r == nullptr || r->batch <= batch) continue;
    ovf_record relabelled = *r;
    relabelled.batch = batch;
    rewrite_record(relabelled);
  }
  ovf_state.batch = batch;
  guessed_steps_ = 0;
}

void Monitor::set_gradients_pending(bool pending) {
  if (!training_steps_) return;
  std::lock_guard<std::mutex> lock(step_mutex_);
  step_clock_.set_gradients_pending(pending);
}

void Monitor::end_step(bool now) {
  if (!training_steps_) return;
  {
    std::lock_guard<std::mutex> lock(step_mutex_);
    if (now)
      step_clock_.begin_now();
    else
      step_clock_.end_step();
  }
  if (now) end_batch();
}

// ---------------------------------------------------------------- the commit step

Monitor::Committed Monitor::append(ovf_record* records, uint32_t count, uint64_t batch) {
  const uint64_t timestamp = now_ns();
  const uint32_t replay = replaying() ? uint32_t{OVF_FLAG_REPLAY} : 0u;
  for (uint32_t i = 0; i < count; ++i) {
    records[i].batch = batch;
    records[i].timestamp_ns = timestamp;
    records[i].flags |= replay;
  }
  const uint64_t first = append_records(records, count);
  return {first, first + count, 0};
}

Monitor::Committed Monitor::commit(ovf_record* records, uint32_t count,
                                   const CommitRequest& request) {
  CommitRequest judged = request;
  // Inside an expected region (now, or when its op ended: OVF_FLAG_EXPECTED) what
  // is non-finite was asked for; the first producer there is a skip's cause.
  const bool region = expecting_nonfinite();
  bool expected = region;
  uint32_t cause = count;
  for (uint32_t i = 0; i < count; ++i) {
    ovf_record& r = records[i];
    if (!(r.flags & OVF_FLAG_NONFINITE) || !(region || (r.flags & OVF_FLAG_EXPECTED))) continue;
    if ((r.flags & OVF_FLAG_PRODUCER) && cause == count) cause = i;
    r.flags &= ~uint32_t{OVF_FLAG_PRODUCER | OVF_FLAG_CARRIER};
    r.flags |= OVF_FLAG_CONSTANT | OVF_FLAG_EXPECTED;
    expected = true;
  }
  if (expected) judged.raw_events &= ~uint32_t{OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_BACKWARD};
  Committed out = append(records, count, request.batch);
  if (cause != count) {
    uint64_t none = OVF_NO_SEQ;
    expected_cause_seq_.compare_exchange_strong(none, out.first + cause);
  }
  out.events = detect(out, records, count, judged);
  return out;
}

uint32_t Monitor::detect(const Committed& span, const ovf_record* records, uint32_t count,
                         const CommitRequest& request) {
  if (replaying()) {
    note_replayed(span, records, count);
    return 0;
  }
  // The first line that holds a NaN/Inf nobody asked for (a constant's is
  // deliberate: it makes no first value and no producer).
  const ovf_record* first_bad = std::find_if(records, records + count, counts_as_nonfinite);
  if (first_bad != records + count) {
    const uint64_t seq = span.first + (first_bad - records);
    __atomic_store_n(&last_nonfinite_seq_, seq, __ATOMIC_RELEASE);
    // The lowest seq wins: a frame judged late (fast device mode) ran before
    // the records committed while its statistics were on their way.
    uint64_t current = __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_RELAXED);
    while (seq < current &&
           !__atomic_compare_exchange_n(&ovf_state.first_nonfinite_seq, &current, seq, true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    ovf_state.detection_state = 2;
  }
  const ovf_control& c = ovf_state.control;
  const uint32_t stop_mask = read_control(c.stop_mask);
  uint32_t events = request.raw_events & stop_mask;
  const uint64_t first_nonfinite =
      __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE);
  const bool holds_first = span.first <= first_nonfinite && first_nonfinite < span.end;
  if ((stop_mask & OVF_STOP_PRODUCER_ONLY) && !request.producer && !holds_first) {
    events &= ~(OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_BACKWARD);
  }
  if (static_cast<int64_t>(request.batch) < read_control(c.after_batch)) events = 0;
  if (events && !module_matches(request.module_id)) events = 0;
  constexpr uint32_t kConditioned = OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_BACKWARD;
  const EventFilter filter = event_filter_.load(std::memory_order_acquire);
  if ((events & kConditioned) && filter != nullptr && !filter(span.first, events & kConditioned))
    events &= ~kConditioned;
  if (events) {
    take_snapshot(span.first);
    ovf_state.last_event_seq = span.first;
    ovf_state.last_event_kind = events;
    ovf_state.last_event_late = judging_late_ || request.late ? 1 : 0;
    replay_if_due(span, records, events, holds_first);
    if (events & kConditioned) write_event_summary(events & kConditioned, span.first);
    stop_and_step(span.first, events);
  }
  return events;
}

uint64_t Monitor::end_batch() {
  {
    std::lock_guard<std::mutex> lock(response_mutex_);
    raise_decided_ = false;
  }
  const uint64_t batch = ++ovf_state.batch;
  ovf_state.frames_per_batch_hint =
      static_cast<uint32_t>(std::min<uint64_t>(frames_this_batch_, UINT32_MAX));
  frames_this_batch_ = 0;
  append_batch_marker(batch);
  return batch;
}

uint32_t Monitor::optimizer_step(FrameBuilder& frame, bool carried) {
  auto& records = frame.records();
  uint32_t raw = 0;
  // Not one of the reference's frames: its own kinds, which reports skip.
  records.front().kind = OVF_KIND_STEP;
  records.front().flags |= carried ? OVF_FLAG_CARRIER : OVF_FLAG_PRODUCER;
  for (size_t i = 1; i < records.size(); ++i) {
    records[i].kind = OVF_KIND_STEP_PARAM;
    raw |= nonfinite_bits(records[i]);
  }
  // The step belongs to the batch whose gradients it applied.
  const uint64_t batch = record_batch();
  const Committed done = commit(records.data(), static_cast<uint32_t>(records.size()),
                                {batch, raw, !carried, records.front().name_id});
  if (done.events & (OVF_STOP_NAN | OVF_STOP_INF)) {
    std::lock_guard<std::mutex> lock(response_mutex_);
    if (!answered_ && !unanswered_step_.events) {
      unanswered_step_ = done;
      unanswered_step_batch_ = batch;
    }
  }
  return done.events;
}

uint32_t Monitor::commit_line(ovf_record& r, uint64_t batch, bool late) {
  uint32_t raw = 0;
  if ((r.flags & OVF_FLAG_NONFINITE) && !(r.flags & OVF_FLAG_CONSTANT)) {
    raw = nonfinite_bits(r);
    // A backward line stops as a backward event, for the kinds asked for (--stop nan).
    if (r.flags & OVF_FLAG_BACKWARD)
      raw = (raw & read_control(ovf_state.control.stop_mask)) ? uint32_t{OVF_STOP_BACKWARD} : 0u;
  }
  // A forward op's values count against the thresholds too (watch --above,
  // --headroom): the stop comes at the op that made a value too large, before
  // a cast to a narrower type overflows.
  if (!(r.flags & OVF_FLAG_BACKWARD) && (r.flags & OVF_FLAG_HAS_STATS) && r.numel) {
    raw |= threshold_bits(r);
  }
  const Committed done = commit(&r, 1,
                                {batch == kBatchNow ? record_batch() : batch, raw,
                                 (r.flags & OVF_FLAG_PRODUCER) != 0, r.context_id, late});
  return done.events;
}

bool Monitor::checkpoint(ovf_record line, const std::string& ctx, std::string* text) {
  line.kind = OVF_KIND_CHECKPOINT;
  line.name_id = intern(ctx);
  line.label_id = line.name_id;
  *text += nonfinite_text(line, ctx);
  // The reference's detect_overflow only reports: a debugger stops here, the
  // process itself never acts on it.
  commit(&line, 1, {record_batch(), nonfinite_bits(line), /*producer=*/true, line.name_id});
  return (line.flags & OVF_FLAG_NONFINITE) != 0;
}

}  // namespace ovf
