// Frame building and the reference's detection semantics over the ring.
#include "ovf/monitor.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ovf/report.h"
#include "ovf/ring_writer.h"

namespace ovf {
namespace {

ovf_record blank_record() {
  ovf_record r;
  std::memset(&r, 0, sizeof r);
  r.frame_seq = OVF_NO_SEQ;
  r.device_index = -1;
  return r;
}

bool is_float_dtype(uint8_t dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: case OVF_DTYPE_FLOAT32: case OVF_DTYPE_FLOAT16: case OVF_DTYPE_BFLOAT16:
    case OVF_DTYPE_COMPLEX64: case OVF_DTYPE_COMPLEX128: case OVF_DTYPE_FLOAT8_E4M3: case OVF_DTYPE_FLOAT8_E5M2:
      return true;
    default:
      return false;
  }
}

// The control block is written by a debugger behind the compiler's back.
template <typename T>
T read_control(const T& field) {
  return *const_cast<const volatile T*>(&field);
}

void append_batch_marker(uint64_t batch) {
  ovf_record marker = blank_record();
  marker.kind = OVF_KIND_BATCH_START;
  marker.batch = batch;
  marker.timestamp_ns = now_ns();
  append_records(&marker, 1);
}

constexpr const char* kOverflowMessage =
    "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further. "
    "Please scroll up above this traceback to see the activation values prior to this event.";

}  // namespace

// ---------------------------------------------------------------- FrameBuilder

void FrameBuilder::begin(uint32_t module_name_id, uint32_t class_name_id, bool is_root, uint64_t forward_start) {
  records_.clear();
  is_root_ = is_root;
  forward_start_ = forward_start;
  ovf_record frame = blank_record();
  frame.kind = OVF_KIND_FRAME;
  frame.name_id = module_name_id;
  frame.label_id = class_name_id;
  frame.flags = is_root ? OVF_FLAG_ROOT : 0;
  records_.push_back(frame);
}

ovf_record& FrameBuilder::add_line() {
  records_.push_back(blank_record());
  return records_.back();
}

void FrameBuilder::add_tensor(ovf_record_kind kind, uint32_t label_id, const TensorView& view, DeviceId device) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return;
  }
  add_stats(kind, label_id, compute_stats_cpu(view), view.dtype, device);
  const ovf_dtype against = headroom_dtype();
  if (against != OVF_DTYPE_UNKNOWN) set_headroom(against, headroom_underflow(view, against));
}

void FrameBuilder::set_headroom(ovf_dtype against, uint64_t underflow) {
  if (records_.size() < 2) return;
  ovf_record& r = records_.back();
  r.headroom_dtype = against;
  r.headroom_underflow = static_cast<uint32_t>(std::min<uint64_t>(underflow, UINT32_MAX));
}

void copy_stats(const Stats& s, ovf_record* r) {
  r->numel = s.numel;
  r->nan_count = s.nan_count;
  r->pos_inf_count = s.pos_inf_count;
  r->neg_inf_count = s.neg_inf_count;
  r->zero_count = s.zero_count;
  r->subnormal_count = s.subnormal_count;
  r->abs_min = s.abs_min;
  r->abs_max = s.abs_max;
  r->abs_min_nonzero = s.abs_min_nonzero;
}

ovf_dtype headroom_dtype() {
  const uint32_t d = read_control(ovf_state.control.headroom_dtype);
  return dtype_max(static_cast<ovf_dtype>(d)) > 0 ? static_cast<ovf_dtype>(d) : OVF_DTYPE_UNKNOWN;
}

uint64_t headroom_underflow(const TensorView& view, ovf_dtype against) {
  return count_below(view, dtype_min_normal(against));
}

void FrameBuilder::add_stats(ovf_record_kind kind, uint32_t label_id, const Stats& s, ovf_dtype dtype,
                             DeviceId device, uint32_t extra_flags) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return;
  }
  ovf_record& r = add_line();
  r.kind = kind;
  r.label_id = label_id;
  r.dtype = dtype;
  r.device_type = device.type;
  r.device_index = device.index;
  r.flags = extra_flags;
  if (s.has_stats) {
    r.flags |= OVF_FLAG_HAS_STATS;
    if (s.numel == 0) r.flags |= OVF_FLAG_EMPTY;
    if (s.nonfinite()) {
      r.flags |= OVF_FLAG_NONFINITE;
      records_.front().flags |= OVF_FLAG_NONFINITE;
    }
  }
  copy_stats(s, &r);
}

void FrameBuilder::add_value(ovf_record_kind what, uint32_t label_id, uint32_t flags) {
  if (full()) {
    records_.front().flags |= OVF_FLAG_TRUNCATED;
    return;
  }
  ovf_record& r = add_line();
  r.kind = what;
  r.label_id = label_id;
  r.flags = flags;
}

// ---------------------------------------------------------------- Monitor

Monitor& Monitor::instance() {
  static Monitor* monitor = new Monitor();  // never destroyed: hooks may run during exit
  return *monitor;
}

std::string Monitor::start_session(const SessionOptions& o) {
  if (o.max_frames_to_save == 0) return "max_frames_to_save must be at least 1";
  if (o.trace_batch_nums.size() > OVF_MAX_TRACE_BATCHES) {
    return "trace_batch_nums holds at most " + std::to_string(OVF_MAX_TRACE_BATCHES) + " batch numbers";
  }
  for (int64_t b : o.trace_batch_nums) {
    if (b < 0) return "trace_batch_nums must hold batch numbers >= 0 (batches are 0-indexed)";
  }
  ovf_control& c = ovf_state.control;
  // A session starts from the reference's behaviour: whatever an earlier
  // session or a debugger set (stop bits, filters, thresholds, ops) is reset.
  c.stop_mask = OVF_STOP_NAN | OVF_STOP_INF;
  c.above = __builtin_inf();
  c.below = 0;
  c.after_batch = 0;
  std::memset(c.module_glob, 0, OVF_GLOB_SIZE);
  c.observe = 0;
  c.headroom_dtype = 0;
  c.trace_count = static_cast<uint32_t>(o.trace_batch_nums.size());
  std::copy(o.trace_batch_nums.begin(), o.trace_batch_nums.end(), c.trace_batches);
  c.abort_after_batch = o.abort_after_batch_num;
  c.on_event = o.on_event;
  c.enabled = 1;
  c.generation++;
  ovf_state.max_frames_to_save = o.max_frames_to_save;
  ovf_state.batch = 0;
  ovf_state.detection_state = 1;
  // "The first non-finite value" is this session's: an earlier one's is history.
  __atomic_store_n(&ovf_state.first_nonfinite_seq, OVF_NO_SEQ, __ATOMIC_RELEASE);
  __atomic_store_n(&last_nonfinite_seq_, OVF_NO_SEQ, __ATOMIC_RELEASE);
  total_calls_ = 0;
  report_floor_ = last_frame_end_ = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
  pending_detection_ = 0;
  warned_ = false;
  frames_this_batch_ = 0;
  active_ = true;
  return "";
}

void Monitor::stop_session() {
  active_ = false;
  ovf_state.detection_state = ovf_state.first_nonfinite_seq == OVF_NO_SEQ ? 0 : 2;
}

bool Monitor::in_trace_batch(uint64_t batch) const {
  const ovf_control& c = ovf_state.control;
  const uint32_t n = std::min<uint32_t>(read_control(c.trace_count), OVF_MAX_TRACE_BATCHES);
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

std::string Monitor::report_text(uint64_t frame_end) {
  return format_detection_report(ovf_state.batch, report_floor_, frame_end, ovf_state.max_frames_to_save) +
         describe_first_nonfinite();
}

Outcome Monitor::finish_frame(FrameBuilder& frame) {
  Outcome out;
  const ovf_control& c = ovf_state.control;
  const uint64_t batch = ovf_state.batch;
  const bool trace_mode = in_trace_batch(batch);
  const uint32_t on_event = read_control(c.on_event);
  const bool reference_prints = on_event != OVF_ON_EVENT_CONTINUE;

  if (total_calls_ == 0) append_batch_marker(batch);
  ++total_calls_;

  auto& records = frame.records();
  const uint64_t timestamp = now_ns();
  uint32_t line_events = 0;
  bool output_nonfinite = false, carried_in = false;
  for (ovf_record& r : records) {
    r.batch = batch;
    r.timestamp_ns = timestamp;
    if (r.kind == OVF_KIND_FRAME || !(r.flags & OVF_FLAG_HAS_STATS) || r.numel == 0) continue;
    if (r.flags & OVF_FLAG_NONFINITE) (r.kind == OVF_KIND_OUTPUT ? output_nonfinite : carried_in) = true;
    if (r.nan_count) line_events |= OVF_STOP_NAN;
    if (r.pos_inf_count + r.neg_inf_count) line_events |= OVF_STOP_INF;
    if (is_float_dtype(r.dtype)) {
      if (r.abs_max > read_control(c.above)) line_events |= OVF_STOP_ABOVE;
      if (r.abs_min_nonzero < read_control(c.below)) line_events |= OVF_STOP_BELOW;
    }
  }
  if (trace_mode) records.front().flags |= OVF_FLAG_TRACED;
  // A carrier got a NaN/Inf in (an input or weight). A producer made it from
  // finite inputs and weights itself: not one of its children or ops, so
  // nothing non-finite was recorded since its forward began (when known).
  const uint64_t last_nonfinite = __atomic_load_n(&last_nonfinite_seq_, __ATOMIC_ACQUIRE);
  const bool made_inside = frame.forward_start() != OVF_NO_SEQ && last_nonfinite != OVF_NO_SEQ &&
                           last_nonfinite >= frame.forward_start();
  if (carried_in) {
    records.front().flags |= OVF_FLAG_CARRIER;
  } else if (output_nonfinite && !made_inside) {
    records.front().flags |= OVF_FLAG_PRODUCER;
  }
  const uint64_t first = append_records(records.data(), static_cast<uint32_t>(records.size()));
  const uint64_t end = first + records.size();
  if (line_events & (OVF_STOP_NAN | OVF_STOP_INF)) __atomic_store_n(&last_nonfinite_seq_, first, __ATOMIC_RELEASE);
  ++ovf_state.frames_written;
  ++frames_this_batch_;

  // The reference prints "<ctx> has nans/infs" while it builds the frame.
  if (line_events & (OVF_STOP_NAN | OVF_STOP_INF)) {
    for (const ovf_record& r : records) {
      if (r.kind == OVF_KIND_FRAME || !(r.flags & OVF_FLAG_NONFINITE)) continue;
      uint64_t expected = OVF_NO_SEQ;
      __atomic_compare_exchange_n(&ovf_state.first_nonfinite_seq, &expected, first + (&r - records.data()), false,
                                   __ATOMIC_RELEASE, __ATOMIC_RELAXED);
      ovf_state.detection_state = 2;
      if (reference_prints) {
        const std::string label = escape_text(interned(r.label_id));
        if (r.nan_count) out.text += label + " has nans\n";
        if (r.pos_inf_count + r.neg_inf_count) out.text += label + " has infs\n";
      }
    }
  }

  if (frame.is_root()) {
    ++ovf_state.batch;
    ovf_state.frames_per_batch_hint = static_cast<uint32_t>(std::min<uint64_t>(frames_this_batch_, UINT32_MAX));
    frames_this_batch_ = 0;
    append_batch_marker(ovf_state.batch);
  }

  if (trace_mode) {
    // reset_saved_frames() then trace_frames(): only this frame, with the
    // batch markers written since the previous frame.
    if (reference_prints) {
      out.text += format_frames(last_frames(last_frame_end_, end, 1, nullptr)) + "\n";
    }
    report_floor_ = end;
  }
  last_frame_end_ = end;

  // Which events fired. Without a debugger the reference's rules hold: NaN/Inf
  // seen in a traced batch is remembered and reported at the next untraced frame.
  uint32_t events = line_events & (OVF_STOP_ABOVE | OVF_STOP_BELOW);
  if (trace_mode) events |= OVF_STOP_TRACED;
  const uint32_t nonfinite = line_events & (OVF_STOP_NAN | OVF_STOP_INF);
  if (reference_prints) {
    pending_detection_ |= nonfinite;
    if (!trace_mode) {
      events |= pending_detection_;
      pending_detection_ = 0;
    }
  } else {
    events |= nonfinite;
  }
  const uint32_t stop_mask = read_control(c.stop_mask);
  events &= stop_mask;
  const uint64_t first_nonfinite = __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE);
  const bool holds_first = first <= first_nonfinite && first_nonfinite < end;
  if ((stop_mask & OVF_STOP_PRODUCER_ONLY) && !(records.front().flags & OVF_FLAG_PRODUCER) && !holds_first) {
    events &= ~(OVF_STOP_NAN | OVF_STOP_INF);
  }
  if (static_cast<int64_t>(batch) < read_control(c.after_batch)) events = 0;
  if (events && !module_matches(records.front().name_id)) events = 0;
  if (events) {
    Outcome event = event_outcome(events, first, end);
    out.text += event.text;
    out.action = event.action;
    out.message = event.message;
    out.events = events;
  }

  const int64_t abort_after = read_control(c.abort_after_batch);
  if (out.action == Action::kNone && abort_after >= 0 && static_cast<int64_t>(ovf_state.batch) > abort_after) {
    if (read_control(c.stop_mask) & OVF_STOP_ABORT_AFTER) {
      ovf_state.last_event_seq = first;
      ovf_state.last_event_kind = OVF_STOP_ABORT_AFTER;
      ovf_stop_event(find_record(first), OVF_STOP_ABORT_AFTER);
    }
    out.action = Action::kRaise;
    out.events |= OVF_STOP_ABORT_AFTER;
    out.message = "DebugUnderflowOverflow: aborting after " + std::to_string(ovf_state.batch) +
                  " batches due to `abort_after_batch_num=" + std::to_string(abort_after) + "` arg";
  }
  return out;
}

uint64_t Monitor::end_batch() {
  const uint64_t batch = ++ovf_state.batch;
  ovf_state.frames_per_batch_hint = static_cast<uint32_t>(std::min<uint64_t>(frames_this_batch_, UINT32_MAX));
  frames_this_batch_ = 0;
  append_batch_marker(batch);
  return batch;
}

Outcome Monitor::event_outcome(uint32_t events, uint64_t frame_seq, uint64_t frame_end) {
  Outcome out;
  ovf_state.last_event_seq = frame_seq;
  ovf_state.last_event_kind = events;
  ovf_stop_event(find_record(frame_seq), events);
  const uint32_t on_event = read_control(ovf_state.control.on_event);
  // Thresholds and traced frames are debugger stops; without one they only
  // mark the ring. Only NaN/Inf act on their own, as in the reference.
  if (on_event == OVF_ON_EVENT_CONTINUE || !(events & (OVF_STOP_NAN | OVF_STOP_INF))) return out;
  switch (on_event) {
    case OVF_ON_EVENT_WARN:
      if (!warned_) out.text = report_text(frame_end);
      warned_ = true;
      break;
    case OVF_ON_EVENT_ABORT:
      out.text = report_text(frame_end);
      out.action = Action::kAbort;
      out.message = "ovf: non-finite value detected; aborting so that the kernel writes a core file "
                    "(open it with: gdb python3 core, then: ovf frames; or without a debugger: "
                    "python3 -m ovf.postmortem core)";
      break;
    case OVF_ON_EVENT_WAIT:
      // Wait at the first event only: once released, every later frame carries
      // the same NaN onward and would stop again.
      if (!warned_) {
        out.text = report_text(frame_end) + attach_instructions(getpid());
        out.action = Action::kWait;
      }
      warned_ = true;
      break;
    default:
      out.text = report_text(frame_end);
      out.action = Action::kRaise;
      out.message = kOverflowMessage;
      break;
  }
  report_floor_ = frame_end;
  return out;
}

uint32_t Monitor::optimizer_step(FrameBuilder& frame, bool carried) {
  const ovf_control& c = ovf_state.control;
  auto& records = frame.records();
  // The step belongs to the batch whose gradients it applied: the root forward
  // already advanced the counter.
  const uint64_t batch = ovf_state.batch > 0 ? ovf_state.batch - 1 : 0;
  const uint64_t timestamp = now_ns();
  uint32_t events = 0;
  for (ovf_record& r : records) {
    r.batch = batch;
    r.timestamp_ns = timestamp;
    if (r.kind == OVF_KIND_FRAME) continue;
    if (r.nan_count) events |= OVF_STOP_NAN;
    if (r.pos_inf_count + r.neg_inf_count) events |= OVF_STOP_INF;
  }
  // Not one of the reference's frames: its own kinds, which reports skip.
  records.front().kind = OVF_KIND_STEP;
  records.front().flags |= carried ? OVF_FLAG_CARRIER : OVF_FLAG_PRODUCER;
  for (size_t i = 1; i < records.size(); ++i) records[i].kind = OVF_KIND_STEP_PARAM;
  const uint64_t first = append_records(records.data(), static_cast<uint32_t>(records.size()));
  if (events == 0) return 0;
  __atomic_store_n(&last_nonfinite_seq_, first, __ATOMIC_RELEASE);
  uint64_t expected = OVF_NO_SEQ;
  __atomic_compare_exchange_n(&ovf_state.first_nonfinite_seq, &expected, first + 1, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  ovf_state.detection_state = 2;
  const uint32_t stop_mask = read_control(c.stop_mask);
  events &= stop_mask;
  const bool holds_first = __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE) == first + 1;
  if ((stop_mask & OVF_STOP_PRODUCER_ONLY) && carried && !holds_first) events = 0;
  if (static_cast<int64_t>(batch) < read_control(c.after_batch)) events = 0;
  if (events) {
    ovf_state.last_event_seq = first;
    ovf_state.last_event_kind = events;
    ovf_stop_event(find_record(first), events);
  }
  return events;
}

uint32_t Monitor::op_output(ovf_record& r) {
  const ovf_control& c = ovf_state.control;
  // A backward pass belongs to the batch whose forward the root already counted.
  const uint64_t counter = ovf_state.batch;
  r.batch = (r.flags & OVF_FLAG_BACKWARD) && counter > 0 ? counter - 1 : counter;
  r.timestamp_ns = now_ns();
  const uint64_t seq = append_records(&r, 1);
  if (!(r.flags & OVF_FLAG_NONFINITE)) return 0;
  // A deliberate NaN/Inf (from a constant argument: masked_fill(-inf), the inf
  // isfinite compares with) is no error: recorded, but it is not the first
  // non-finite value, makes no producer, and never stops.
  if (r.flags & OVF_FLAG_CONSTANT) return 0;
  __atomic_store_n(&last_nonfinite_seq_, seq, __ATOMIC_RELEASE);
  const uint32_t stop_mask = read_control(c.stop_mask);
  uint64_t expected = OVF_NO_SEQ;
  const bool first = __atomic_compare_exchange_n(&ovf_state.first_nonfinite_seq, &expected, seq, false,
                                                 __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  ovf_state.detection_state = 2;
  uint32_t events = (r.flags & OVF_FLAG_BACKWARD)
                        ? static_cast<uint32_t>(OVF_STOP_BACKWARD)
                        : (r.nan_count ? uint32_t{OVF_STOP_NAN} : 0u) |
                              (r.pos_inf_count + r.neg_inf_count ? uint32_t{OVF_STOP_INF} : 0u);
  events &= stop_mask;
  if ((stop_mask & OVF_STOP_PRODUCER_ONLY) && !(r.flags & OVF_FLAG_PRODUCER) && !first) events = 0;
  if (static_cast<int64_t>(r.batch) < read_control(c.after_batch)) events = 0;
  if (events && !module_matches(r.context_id)) events = 0;
  if (events) {
    ovf_state.last_event_seq = seq;
    ovf_state.last_event_kind = events;
    ovf_stop_event(find_record(seq), events);
  }
  return events;
}

bool Monitor::checkpoint(const Stats& s, ovf_dtype dtype, DeviceId device, const std::string& ctx,
                         std::string* text) {
  ovf_record r = blank_record();
  r.kind = OVF_KIND_CHECKPOINT;
  r.name_id = intern(ctx);
  r.label_id = r.name_id;
  r.batch = ovf_state.batch;
  r.timestamp_ns = now_ns();
  r.dtype = dtype;
  r.device_type = device.type;
  r.device_index = device.index;
  if (s.has_stats) r.flags |= OVF_FLAG_HAS_STATS | (s.numel == 0 ? OVF_FLAG_EMPTY : 0);
  if (s.nonfinite()) r.flags |= OVF_FLAG_NONFINITE;
  copy_stats(s, &r);
  const uint64_t seq = append_records(&r, 1);
  const std::string label = escape_text(ctx);
  if (s.nan_count) *text += label + " has nans\n";
  if (s.pos_inf_count + s.neg_inf_count) *text += label + " has infs\n";
  if (!s.nonfinite()) return false;
  uint64_t expected = OVF_NO_SEQ;
  __atomic_compare_exchange_n(&ovf_state.first_nonfinite_seq, &expected, seq, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  const ovf_control& c = ovf_state.control;
  uint32_t events = (s.nan_count ? OVF_STOP_NAN : 0) | (s.pos_inf_count + s.neg_inf_count ? OVF_STOP_INF : 0);
  events &= read_control(c.stop_mask);
  // The reference's detect_overflow only reports; a debugger still stops here.
  if (events && read_control(c.on_event) == OVF_ON_EVENT_CONTINUE) {
    ovf_state.last_event_seq = seq;
    ovf_state.last_event_kind = events;
    ovf_stop_event(find_record(seq), events);
  }
  return true;
}

std::string attach_instructions(int pid) {
  const std::string p = std::to_string(pid);
  // Under torchrun the ranks' output interleaves and gdb -p works only on the
  // rank's own host: name both. A single process reads as before.
  std::string who = "process " + p, where;
  if (ovf_state.rank >= 0) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    who = "rank " + std::to_string(ovf_state.rank) + " of " + std::to_string(ovf_state.world_size) + " (process " +
          p + " on " + host + ")";
    where = std::string(" on ") + host;
  }
  return "ovf: " + who + " is waiting for a debugger. Attach" + where + " with one of:\n" +
         "    gdb -p " + p + " -ex 'ovf frames'\n" +
         "    lldb -p " + p + " -o 'ovf frames'\n" +
         "ovf: then 'ovf release' and 'continue' let training go on.\n";
}

std::string on_event_name(uint32_t on_event) {
  switch (on_event) {
    case OVF_ON_EVENT_RAISE: return "raise";
    case OVF_ON_EVENT_WARN: return "warn";
    case OVF_ON_EVENT_ABORT: return "abort";
    case OVF_ON_EVENT_WAIT: return "wait";
    case OVF_ON_EVENT_CONTINUE: return "continue";
    default: return "unknown";
  }
}

}  // namespace ovf
