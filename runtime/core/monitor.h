// The detector: every record source hands its records to one commit step,
// which appends them, keeps the first non-finite value and the detection state,
// applies the control block's filters and calls the stop hook; one response
// step then decides what the process does about an event without a debugger.
// On top, the reference's semantics for module frames (DebugUnderflowOverflow's
// batch counting, tracing and report). Knows nothing of torch or Python: the
// drivers (the pybind11 module, the C++ API, the op observer) translate.
#ifndef OVF_MONITOR_H
#define OVF_MONITOR_H

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "frame_builder.h"
#include "ovf/ring.h"
#include "response.h"

namespace ovf {

struct SessionOptions {
  uint32_t max_frames_to_save = 21;
  std::vector<int64_t> trace_batch_nums;
  int64_t abort_after_batch_num = -1;
  ovf_on_event on_event = OVF_ON_EVENT_RAISE;
};

class Monitor {
 public:
  static Monitor& instance();

  // Starts counting batches from 0 with fresh reference state; resets the
  // control block to the reference's behaviour plus these options (a debugger
  // may change it later). Returns "" or why the options were refused.
  std::string start_session(const SessionOptions& options);
  void stop_session();
  bool active() const { return active_; }

  // A module forward's frame: appended, the batch counter advanced after the
  // root module's frame, events decided as the reference does. The response
  // says what to print and do.
  Response finish_frame(FrameBuilder& frame);

  // For drivers that see no root module forward (the C++ API): the batch ends
  // here. Returns the new batch number.
  uint64_t end_batch();

  // The root module's forward begins (its pre-hook): records from now on
  // belong to the batch the counter says (see record_batch in monitor.cpp).
  void begin_root_forward();

  // After optimizer.step(): `frame` holds the parameters (and state tensors)
  // that came out non-finite. `carried`: a gradient of one of them was
  // non-finite already. Never acts: without a debugger the next forward
  // reports the weights, as the reference does. Returns the events.
  uint32_t optimizer_step(FrameBuilder& frame, bool carried);

  // detect_overflow(var, ctx): `line` is the tensor's line (make_line); records
  // it as a CHECKPOINT named `ctx`, adds the reference's "ctx has nans/infs"
  // lines to `text` and returns whether it holds either.
  bool checkpoint(ovf_record line, const std::string& ctx, std::string* text);

  // A standalone line: an op's output (OP_OUTPUT), a module output's gradient
  // (GRAD), a buffer that turned non-finite (BUFFER); its source filled in the
  // flags (producer, carrier, constant, backward) and the module (context_id).
  // Thread-safe. Returns the events; drivers that act on them call
  // respond_to_op.
  uint32_t commit_line(ovf_record& line);

  // What the process does about an op event (on_event): the report text, and
  // abort / wait; raise becomes pending (take_pending_raise), because an op's
  // callback cannot throw into the op. Thread-safe.
  Response respond_to_op(const ovf_record& line, uint32_t events);

  // A raise decided at an op, taken once: the batch it happened in.
  bool take_pending_raise(uint64_t* batch);

  // Whether the control block's module glob matches this interned module path
  // (OVF_NO_ID, no module, matches only an empty glob). Thread-safe.
  bool module_matches(uint32_t module_name_id);

 private:
  // The one commit step (see the file comment).
  struct CommitRequest {
    uint64_t batch;       // stamped on every record
    uint32_t raw_events;  // stop bits the source raises, before the control block's filters
    bool producer;        // passes OVF_STOP_PRODUCER_ONLY (made here, not carried in)
    uint32_t module_id;   // what the module glob is matched against
  };
  struct Committed {
    uint64_t first;   // seq of records[0], the record the stop hook names
    uint64_t end;     // seq after the last record
    uint32_t events;  // stop bits that fired
  };
  Committed commit(ovf_record* records, uint32_t count, const CommitRequest& request);

  // The one response step: `end` bounds the report, `batch` is the event's
  // (the report's batch_number).
  Response respond(uint32_t events, uint64_t end, uint64_t batch, bool can_raise);
  std::string report_text(uint64_t end, uint64_t batch);
  bool in_trace_batch(uint64_t batch) const;
  uint64_t record_batch() const;

  bool active_ = false;
  std::vector<int64_t> trace_batches_;  // the session's trace_batch_nums, any number of them
  uint64_t total_calls_ = 0;
  uint64_t last_frame_end_ = 0;     // seq after the previous frame's last line
  uint32_t pending_detection_ = 0;  // the reference's sticky detected_overflow (NAN/INF bits)
  uint64_t last_nonfinite_seq_ = OVF_NO_SEQ;  // newest record holding a NaN/Inf (atomic access)
  uint64_t frames_this_batch_ = 0;
  std::atomic<bool> between_batches_{false};  // the root forward ended, the next has not begun
  std::mutex response_mutex_;                 // ops respond from autograd threads too
  uint64_t report_floor_ = 0;                 // records before this seq were reported or reset
  bool acted_once_ = false;                   // WARN and WAIT act on the first event only
  bool raise_pending_ = false;
  bool raise_decided_ = false;  // an op's raise was decided in this batch: report it once
  uint64_t raise_batch_ = 0;
  std::mutex glob_mutex_;  // module_matches runs on autograd threads too (backward ops)
  std::vector<std::pair<uint32_t, bool>> glob_cache_;  // by name id: (generation + 1, matches)
};

}  // namespace ovf

#endif  // OVF_MONITOR_H
