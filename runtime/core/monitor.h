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
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "frame_builder.h"
#include "growth_watch.h"
#include "ovf/ring.h"
#include "response.h"
#include "step_clock.h"

namespace ovf {

struct SessionOptions {
  uint32_t max_frames_to_save = 21;
  std::vector<int64_t> trace_batch_nums;
  int64_t abort_after_batch_num = -1;
  ovf_on_event on_event = OVF_ON_EVENT_RAISE;
  // How a frame's device statistics are waited for (device_stats.h): fast
  // judges it when they arrive, exact waits for them in the frame's own hook.
  ovf_device_mode device_mode = OVF_DEVICE_MODE_FAST;
  // Batches are the user's training steps (step_clock.h: auto mode), not the
  // root module's forwards (the reference's count, DebugUnderflowOverflow(model)).
  bool count_training_steps = false;
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

  // An --if expression in the process (Python mode): called with an event's
  // record and its NaN/Inf/backward stop bits once the control block's filters
  // passed it; false drops the event (no stop, no response). nullptr: none.
  using EventFilter = bool (*)(uint64_t seq, uint32_t events);
  void set_event_filter(EventFilter filter) { event_filter_.store(filter); }

  // A region where non-finite values are expected (ovf.expected_nonfinite():
  // a loss scaler's overflow probe). Process-wide and nestable: the backward
  // pass's threads run inside the region of the thread that called backward().
  // Lines committed in it are flagged deliberate and raise no NaN/Inf event.
  void expect_nonfinite(bool enter) { expected_depth_.fetch_add(enter ? 1 : -1); }
  bool expecting_nonfinite() const { return expected_depth_.load(std::memory_order_relaxed) > 0; }

  // A loss scaler's update (GradScaler.update()): a skipped step, or a change
  // of scale, becomes a SCALER record (monitor_scaler.cpp) naming the first
  // producer recorded in an expected region since the previous update; a run
  // of skips that reaches control.scaler_max_skips, or a skip that leaves the
  // scale below control.scale_floor, is an OVF_STOP_SCALER event.
  struct ScalerUpdate {
    uint32_t class_id = OVF_NO_ID;      // "GradScaler"
    uint32_t parameter_id = OVF_NO_ID;  // the first parameter with a non-finite gradient
    double scale_before = 0;
    double scale_after = 0;
    bool skipped = false;
  };
  Response scaler_update(const ScalerUpdate& update, bool can_raise);

  // Early warnings (monitor_early.cpp): a module whose output grows toward its
  // dtype's limit (control.early_horizon; judged with each frame), and an
  // optimizer step whose update-to-weight ratio passes control.update_ratio_max.
  // The first of a session is a WARNING record and an OVF_STOP_EARLY event; the
  // run heads one way from there, so later ones are not recorded.
  struct UpdateRatio {
    uint32_t class_id = OVF_NO_ID;      // the optimizer's class
    uint32_t parameter_id = OVF_NO_ID;  // the parameter with the largest update
    double ratio = 0;                   // |dw| / |w| over the step's parameters
    double parameter_ratio = 0;         // that parameter's own
  };
  Response update_ratio(const UpdateRatio& update, bool can_raise);

  // A module forward's frame: appended, the batch counter advanced after the
  // root module's frame, events decided as the reference does. The response
  // says what to print and do. A frame with device lines (PENDING) is judged
  // when their statistics arrive: at once in exact mode; in fast mode at this
  // or a later hook, and at the latest at the end of the next batch's forward.
  // Frames are judged in the order they ran, so one that waits holds back the
  // frames after it. The response may be an earlier frame's.
  Response finish_frame(FrameBuilder& frame);

  // Fast device mode: judges the frames whose statistics arrived, in order,
  // without waiting. Hooks call it first. `can_raise`: the driver can raise
  // where it runs (else a raise becomes pending).
  Response poll_device_frames(bool can_raise);
  // Waits for every frame still pending and judges it: the end of a session,
  // the process's exit.
  Response flush_device_frames(bool can_raise);

  // For drivers that see no root module forward (the C++ API): the batch ends
  // here. Returns the new batch number.
  uint64_t end_batch();

  // The root module's forward begins (its pre-hook): records from now on
  // belong to the batch the counter says (see record_batch in monitor.cpp).
  void begin_root_forward();

  // Training steps (SessionOptions::count_training_steps): a step root's
  // forward begins (its pre-hook) and may begin the next step; what ends a
  // step, and that it ended. No-ops when counting root forwards.
  void begin_step_root_forward(uint32_t root_id, bool grad_enabled, uint32_t call_site);
  void set_step_end(StepEnd rule);
  // `now`: the next step begins here, not at the next step root's forward.
  void end_step(bool now);
  // StepClock::set_gradients_pending, under the clock's lock.
  void set_gradients_pending(bool pending);

  // After optimizer.step(): `frame` holds the parameters (and state tensors)
  // that came out non-finite. `carried`: a gradient of one of them was
  // non-finite already. Never acts: without a debugger the next forward
  // reports the weights, as the reference does. Returns the events.
  uint32_t optimizer_step(FrameBuilder& frame, bool carried);

  // The session's end: a step's NaN/Inf that no later forward answered (the
  // last step, a parameter no module reads) gets its response now, as the next
  // forward's would have been (the report; a raise becomes pending, warn goes
  // on): no program ends with status 0 after a NaN. {} when nothing is due.
  Response answer_unanswered_step();

  // detect_overflow(var, ctx): `line` is the tensor's line (make_line); records
  // it as a CHECKPOINT named `ctx`, adds the reference's "ctx has nans/infs"
  // lines to `text` and returns whether it holds either.
  bool checkpoint(ovf_record line, const std::string& ctx, std::string* text);

  // A standalone line: an op's output (OP_OUTPUT), a module output's gradient
  // (GRAD), a buffer that turned non-finite (BUFFER); its source filled in the
  // flags (producer, carrier, constant, backward) and the module (context_id).
  // Thread-safe. Returns the events; drivers that act on them call
  // respond_to_op. `batch`: the batch it belongs to (a line judged after its
  // statistics arrived, maybe in a later batch), else record_batch(); `late`:
  // judged after its op returned (the event's snapshot is of a later stack).
  uint32_t commit_line(ovf_record& line, uint64_t batch = kBatchNow, bool late = false);
  static constexpr uint64_t kBatchNow = ~uint64_t{0};

  // The batch a record written now belongs to (see monitor.cpp).
  uint64_t record_batch() const;

  // What the process does about an op event (on_event): the report text, and
  // abort / wait; raise becomes pending (take_pending_raise), because an op's
  // callback cannot throw into the op. Thread-safe.
  Response respond_to_op(const ovf_record& line, uint32_t events);

  // A raise decided at an op, taken once: the batch it happened in.
  bool take_pending_raise(uint64_t* batch);

  // Whether --on-nan warn reported a NaN/Inf in this process and training went
  // on: its exit status must not be 0 (the drivers' exit judges ask). Kept
  // across sessions: a later session does not make the first NaN finite.
  bool went_on_after_nonfinite();

  // The replay (monitor_replay.cpp): at a module event that holds the session's
  // first NaN/Inf (made in the module, or between modules), or an optimizer step's
  // (`frame_seq` its STEP), before the stop hook, the hook runs the step's forward
  // (the optimizer's step) again with its ops observed (the driver knows how), so
  // that the report, the stop and a core name the op that made the value as --ops
  // would. Once a session. `batch`: the event's; `compiled`: the frame was
  // written inside a torch.compile'd graph. nullptr: no replay.
  using ReplayHook = void (*)(uint64_t frame_seq, uint64_t batch, bool compiled);
  void set_replay_hook(ReplayHook hook) { replay_hook_.store(hook, std::memory_order_release); }
  // Between the two, records are flagged OVF_FLAG_REPLAY and decide nothing (no
  // event, no first value, no response); the first producer among them is kept.
  void begin_replay();
  // Ends the replay and writes its outcome into the FRAME (STEP) `frame_seq`: cause_seq,
  // the producer's record (or OVF_NO_SEQ), and verdict_id, `said` (the driver's
  // line: how the replay went, or why it did not run).
  void end_replay(uint64_t frame_seq, const std::string& said);
  // Ends a later pass of the replay (a debugger's stepping), which writes nothing.
  void end_replay_pass();

  // Stepping (`ovf step-into`, monitor_replay.cpp): when the stop hook of an event
  // whose replay named its op returns with control.step_request OVF_STEP_INTO, the
  // hook replays the step once more, stopping at the producing module's lines (the
  // driver calls the stop hook there, OVF_STOP_STEP), and returns how it went; then
  // the event's stop comes again. nullptr: no stepping.
  using StepHook = std::string (*)(uint64_t frame_seq);
  void set_step_hook(StepHook hook) { step_hook_.store(hook, std::memory_order_release); }
  bool replaying() const { return replaying_.load(std::memory_order_acquire); }
  // The replay has its producer: the driver may end the replay's forward there.
  bool replay_found() const { return replay_producer_seq() != OVF_NO_SEQ; }
  uint64_t replay_producer_seq() const { return replay_producer_.load(); }

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
    bool late = false;    // a line judged after its op returned (last_event_late)
  };
  struct Committed {
    uint64_t first;   // seq of records[0], the record the stop hook names
    uint64_t end;     // seq after the last record
    uint32_t events;  // stop bits that fired
  };
  Committed commit(ovf_record* records, uint32_t count, const CommitRequest& request);
  // The commit step's first half: stamped with `batch` and the time, appended.
  Committed append(ovf_record* records, uint32_t count, uint64_t batch);
  // The commit step's second half, for records already in the ring.
  uint32_t detect(const Committed& span, const ovf_record* records, uint32_t count,
                  const CommitRequest& request);

  // What a frame's judgement needs to know of the moment it was finished.
  struct FrameContext {
    uint64_t batch = 0;  // the counter when it was finished
    bool trace_mode = false;
    bool reference_prints = false;
    bool is_root = false;
    bool judge_masks = false;  // FrameBuilder::inputs_may_be_masks
    uint64_t forward_start = OVF_NO_SEQ;
    uint64_t previous_end = 0;  // seq after the frame before it (trace mode prints from there)
    uint64_t boundary = 0;      // batch boundaries (root frames) finished before it
  };
  // A frame appended with its device lines PENDING, judged when they arrive.
  struct DeferredFrame {
    std::vector<ovf_record> records;  // as appended: records[0].seq is the FRAME's
    PendingLines pending;             // empty once arrived
    FrameContext context;
  };
  // Flags the frame producer or carrier (and traced) from its lines; returns
  // the stop bits it raises before the control block's filters.
  uint32_t classify(std::vector<ovf_record>& records, const FrameContext& context);
  // The reference's text and the response to a committed frame's events.
  Response answer_frame(const std::vector<ovf_record>& records, const FrameContext& context,
                        const Committed& done, bool can_raise, bool quiet);
  // Judges deferred frames in order: waits for those of batch boundaries
  // before `wait_before`, stops at the first that has not arrived.
  // `own_end`: the seq after the frame whose hook is running (judging it is
  // not late), 0 from other hooks.
  // `quiet`: judged, not answered.
  Response drain(uint64_t wait_before, bool can_raise, uint64_t own_end, bool quiet);
  Response judge_deferred(DeferredFrame& frame, bool can_raise, bool quiet);
  // Publishes deferred_'s size and how many of its frames wait for statistics.
  void count_pending();

  // A judged frame's outputs, followed for the early warning (monitor_early.cpp).
  Response watch_growth(const std::vector<ovf_record>& records, uint64_t batch, bool can_raise);
  // The session's first early warning: committed, answered. Later ones: nothing.
  Response warn_early(ovf_record& warning, uint64_t batch, uint32_t module_id, bool can_raise);

  // The one response step: `end` bounds the report, `batch` is the event's
  // (the report's batch_number).
  Response respond(uint32_t events, uint64_t end, uint64_t batch, bool can_raise);
  std::string report_text(uint64_t end, uint64_t batch);
  bool in_trace_batch(uint64_t batch) const;

  bool active_ = false;
  bool training_steps_ = false;   // SessionOptions::count_training_steps
  StepClock step_clock_;          // guarded by step_mutex_
  uint64_t guessed_steps_ = 0;    // steps begun by a guess (StepClock::Begins::kGuessed) ...
  uint64_t first_guess_seq_ = 0;  // ... the first of them at this record
  std::mutex step_mutex_;
  // Undoes the guessed steps: the counter goes back, records since the first
  // guess are relabelled. Under step_mutex_.
  void undo_guessed_steps();
  std::vector<int64_t> trace_batches_;  // the session's trace_batch_nums, any number of them
  uint64_t total_calls_ = 0;
  uint64_t last_frame_end_ = 0;          // seq after the previous frame's last line
  uint64_t session_start_ = 0;           // the first seq this session wrote
  std::deque<DeferredFrame> deferred_;   // fast device mode: appended, not judged yet
  uint64_t boundaries_ = 0;              // root frames finished this session
  bool judging_late_ = false;            // a deferred frame is judged after its hook returned
  std::recursive_mutex deferred_mutex_;  // C++ programs may finish frames on several threads
  std::atomic<int> expected_depth_{0};
  std::atomic<uint64_t> expected_cause_seq_{OVF_NO_SEQ};  // see scaler_update
  uint32_t skips_in_row_ = 0;                             // under response_mutex_
  GrowthWatch growth_;                                    // under deferred_mutex_
  std::atomic<bool> warned_early_{false};                 // this session's early warning came
  std::atomic<EventFilter> event_filter_{nullptr};
  std::atomic<size_t> deferred_count_{0};  // deferred_.size(), read without the lock by polls
  uint32_t pending_detection_ = 0;  // the reference's sticky detected_overflow (NAN/INF bits)
  uint64_t last_nonfinite_seq_ = OVF_NO_SEQ;  // newest record holding a NaN/Inf (atomic access)
  uint64_t frames_this_batch_ = 0;
  std::atomic<bool> between_batches_{false};  // the root forward ended, the next has not begun
  std::mutex response_mutex_;                 // ops respond from autograd threads too
  uint64_t report_floor_ = 0;                 // records before this seq were reported or reset
  bool acted_once_ = false;                   // WARN and WAIT act on the first event only
  bool went_on_after_nonfinite_ = false;      // WARN reported a NaN/Inf (never reset)
  bool answered_ = false;  // an event of this session got a response (a report, an action)
  bool raise_pending_ = false;
  Committed unanswered_step_{0, 0, 0};  // a step's NaN/Inf event no response followed yet
  uint64_t unanswered_step_batch_ = 0;
  bool raise_decided_ = false;  // an op's raise was decided in this batch: report it once
  uint64_t raise_batch_ = 0;
  // Calls the replay hook where the event `span` asks for one (see set_replay_hook).
  void replay_if_due(const Committed& span, const ovf_record* records, uint32_t events,
                     bool holds_first);
  // detect() while replaying: keeps the first producer, decides nothing.
  void note_replayed(const Committed& span, const ovf_record* records, uint32_t count);
  std::atomic<ReplayHook> replay_hook_{nullptr};
  std::atomic<bool> replaying_{false};
  std::atomic<uint64_t> replay_producer_{OVF_NO_SEQ};
  std::atomic<bool> replayed_{false};  // this session's replay ran (one a session)
  std::atomic<StepHook> step_hook_{nullptr};
  // The event's stop hook, then the debugger's step-into requests (set_step_hook).
  void stop_and_step(uint64_t frame_seq, uint32_t events);
  std::mutex glob_mutex_;  // module_matches runs on autograd threads too (backward ops)
  std::vector<std::pair<uint32_t, bool>> glob_cache_;  // by name id: (generation + 1, matches)
};

}  // namespace ovf

#endif  // OVF_MONITOR_H
