// The detector: builds frames into the ring and decides, per the control block,
// which frames are events. It reproduces DebugUnderflowOverflow's batch counting,
// tracing and reporting, and knows nothing of torch or Python: the hooks (the
// pybind11 module, the C++ API) feed it tensors as ovf::TensorView.
#ifndef OVF_MONITOR_H
#define OVF_MONITOR_H

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ovf/ring.h"
#include "ovf/stats.h"

namespace ovf {

// Lines beyond this many in one frame are dropped and the frame is flagged
// OVF_FLAG_TRUNCATED: a forward returning a list of 10^5 tensors must not flood the ring.
constexpr uint32_t kMaxLinesPerFrame = 512;

struct DeviceId {
  uint8_t type = 0;  // 0 cpu, 1 cuda, 255 other
  int8_t index = -1;
};

// One frame being assembled: the FRAME record first, then its lines. Reused
// across calls so that steady-state hooks allocate nothing.
class FrameBuilder {
 public:
  // `forward_start` is write_seq when the module's forward began (its pre-hook),
  // OVF_NO_SEQ when unknown: it tells a producer from a parent of one.
  void begin(uint32_t module_name_id, uint32_t class_name_id, bool is_root, uint64_t forward_start = OVF_NO_SEQ);
  // Computes the tensor's stats on the CPU and adds a line.
  void add_tensor(ovf_record_kind kind, uint32_t label_id, const TensorView& view, DeviceId device);
  // Adds a line whose stats were computed elsewhere (weight cache, GPU engine).
  void add_stats(ovf_record_kind kind, uint32_t label_id, const Stats& stats, ovf_dtype dtype, DeviceId device,
                 uint32_t extra_flags = 0);
  // Sets the headroom fields of the line added last.
  void set_headroom(ovf_dtype against, uint64_t underflow);
  // A line without data: `what` is OVF_KIND_NONE, OVF_KIND_NOT_TENSOR, or a
  // tensor kind with OVF_FLAG_NO_DATA (a tensor whose memory cannot be read here).
  void add_value(ovf_record_kind what, uint32_t label_id, uint32_t flags = 0);
  bool full() const { return records_.size() > kMaxLinesPerFrame; }
  bool is_root() const { return is_root_; }
  uint64_t forward_start() const { return forward_start_; }
  std::vector<ovf_record>& records() { return records_; }

 private:
  ovf_record& add_line();
  std::vector<ovf_record> records_;
  bool is_root_ = false;
  uint64_t forward_start_ = OVF_NO_SEQ;
};

enum class Action {
  kNone,
  kRaise,  // raise the error in `message` (NonFiniteError: a ValueError)
  kAbort,  // flush output, then abort(): the kernel writes a core with the ring in it
  kWait,   // wait until a debugger releases the process (control.wait_released)
};

// What the caller must do after a frame: print `text` (it is exactly what the
// reference prints at that moment), then act.
struct Outcome {
  std::string text;
  Action action = Action::kNone;
  std::string message;
  uint32_t events = 0;  // enum ovf_stop_bits that fired
};

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
  // may change it later).
  // Returns "" or why the options were refused.
  std::string start_session(const SessionOptions& options);
  void stop_session();
  bool active() const { return active_; }

  // Appends the frame to the ring, advances the batch counter after the root
  // module's frame, evaluates the control block and returns what to do.
  Outcome finish_frame(FrameBuilder& frame);

  // For drivers that see no root module forward (the C++ API): the batch ends
  // here. Advances the batch counter as a root frame does and writes the next
  // batch's marker. Returns the new batch number.
  uint64_t end_batch();

  // After optimizer.step(): `frame` holds the parameters that came out
  // non-finite (named by module path). `carried`: a gradient of one of them was
  // non-finite already (the step passed a NaN on; else the step produced it).
  // Appends the frame and calls the stop hook for NaN/Inf per the control
  // block. Never raises: without a debugger the next forward reports the
  // weights, as the reference does.
  uint32_t optimizer_step(FrameBuilder& frame, bool carried);

  // detect_overflow(var, ctx): records a CHECKPOINT line, prints the reference's
  // "ctx has nans" / "ctx has infs" lines, and returns whether either was found.
  bool checkpoint(const Stats& stats, ovf_dtype dtype, DeviceId device, const std::string& ctx,
                  std::string* text);

  // An op's output line (OP_OUTPUT, stats, flags and context filled in): appends
  // it and calls the stop hook for the events the control block asks for. Ops
  // never raise: the module frame that carries the value reports it. Thread-safe.
  uint32_t op_output(ovf_record& line);

  // The gradient of a module's output (a GRAD record, BACKWARD flagged): appended
  // and evaluated like a backward op's output. Thread-safe.
  uint32_t gradient(ovf_record& line) { return op_output(line); }

  // Whether the control block's module glob matches this interned module path
  // (OVF_NO_ID, no module, matches only an empty glob). Thread-safe.
  bool module_matches(uint32_t module_name_id);

 private:
  Outcome event_outcome(uint32_t events, uint64_t frame_seq, uint64_t frame_end);
  std::string report_text(uint64_t frame_end);
  bool in_trace_batch(uint64_t batch) const;

  bool active_ = false;
  uint64_t total_calls_ = 0;
  uint64_t report_floor_ = 0;      // frames before this seq were reported or reset
  uint64_t last_frame_end_ = 0;    // seq after the previous frame's last line
  uint32_t pending_detection_ = 0; // the reference's sticky detected_overflow (NAN/INF bits)
  bool warned_ = false;  // WARN and WAIT act on the first event only
  uint64_t last_nonfinite_seq_ = OVF_NO_SEQ;  // newest record holding a NaN/Inf (atomic access)
  uint64_t frames_this_batch_ = 0;
  std::mutex glob_mutex_;  // module_matches runs on autograd threads too (backward ops)
  std::vector<std::pair<uint32_t, bool>> glob_cache_;  // by name id: (generation + 1, matches)
};

// The stats fields of a record (counts and abs min/max); flags are the caller's.
void copy_stats(const Stats& stats, ovf_record* record);

// control.headroom_dtype, when it names a floating dtype (else OVF_DTYPE_UNKNOWN).
ovf_dtype headroom_dtype();

// The headroom count of `view` against `against`: finite non-zero values below
// its smallest normal (0 for non-floating tensors).
uint64_t headroom_underflow(const TensorView& view, ovf_dtype against);

// Event outcome helpers shared by every driver.
std::string attach_instructions(int pid);
std::string on_event_name(uint32_t on_event);

}  // namespace ovf

#endif  // OVF_MONITOR_H
