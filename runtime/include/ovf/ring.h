// The one contract between the runtime and every reader (gdb, lldb, core files,
// python3 -m ovf.postmortem): the state behind the exported symbol `ovf_state`.
//
// A reader finds `ovf_state` by its dynamic symbol (no debug info needed), reads
// the fixed header, checks magic / version / sizes, then follows the two
// addresses it holds (records, names) with plain memory reads. Nothing here is
// ever computed by calling into the inferior. docs/ring-layout.md describes the
// same bytes for humans; plugin/ovf_plugin/layout.py decodes them and a test
// compiles this header and checks the decoder agrees field by field.
//
// Rules for changing this file: never move or resize a field; add fields only
// into reserved space (header, control block and record each keep some) and
// bump OVF_LAYOUT_VERSION with every addition. A reader reads every version it
// knows (version 1: 128-byte records whose last 8 bytes were a union, see
// docs/ring-layout.md) and names a newer one as such, never as corrupt.
#ifndef OVF_RING_H
#define OVF_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// "OVF-RING" read as a little-endian u64. Written at start-up, not stored in
// .rodata as a string, so a memory scan for it finds the live state first.
#define OVF_MAGIC 0x474e49522d46564fULL
#define OVF_LAYOUT_VERSION 9u
#define OVF_HEADER_SIZE 1024u
#define OVF_RECORD_SIZE 256u  // 192 in layouts 2-5, 128 in layout 1
#define OVF_CONTROL_OFFSET 256u
#define OVF_CONTROL_SIZE 640u
#define OVF_NO_SEQ UINT64_MAX  // "none" for sequence-valued fields
#define OVF_NO_ID UINT32_MAX   // "none" for string-table ids
#define OVF_GLOB_SIZE 256u
#define OVF_MAX_TRACE_BATCHES 32u
#define OVF_ROWS_KEPT 6u  // a record's rows[] (layout 7)

// What a cast to a narrower floating type would lose (layout 6): a line's
// cast_counts[target * 3 + loss], saturating at UINT32_MAX. The counts are those
// of torch's own conversion (round to nearest even): overflow, a finite value
// that becomes inf (NaN for float8_e4m3fn, which has no inf); flush, a non-zero
// value that becomes 0; subnormal, one that becomes a non-zero subnormal.
enum ovf_cast_target {
  OVF_CAST_FLOAT16 = 0,
  OVF_CAST_BFLOAT16 = 1,
  OVF_CAST_FLOAT8_E4M3 = 2,
  OVF_CAST_FLOAT8_E5M2 = 3,
  OVF_CAST_TARGETS = 4,
};
enum ovf_cast_loss {
  OVF_CAST_OVERFLOW = 0,
  OVF_CAST_FLUSH = 1,
  OVF_CAST_SUBNORMAL = 2,
  OVF_CAST_LOSSES = 3,
};

// What a record is. A frame is one FRAME record followed by its lines
// (WEIGHT, INPUT, OUTPUT, ...) that carry the FRAME's seq in `frame_seq`.
enum ovf_record_kind {
  OVF_KIND_EMPTY = 0,        // slot never written
  OVF_KIND_FRAME = 1,        // module forward: name_id = module path, label_id = class
  OVF_KIND_WEIGHT = 2,       // a parameter of the frame's module: label_id = its name
  OVF_KIND_INPUT = 3,        // label_id = "input[0]", "input[\"mask\"]", ...
  OVF_KIND_OUTPUT = 4,       // label_id = "output", "output[1][0]", "output[\"logits\"]"
  OVF_KIND_GRAD = 5,         // the gradient of a module's output (backward observed): name_id and
                             // context_id = module path, label_id = "grad output[0]"; standalone
  OVF_KIND_OP_OUTPUT = 6,    // output of an ATen op (op observer)
  OVF_KIND_CHECKPOINT = 7,   // detect_overflow(var, ctx): name_id = ctx
  OVF_KIND_BATCH_START = 8,  // "*** Starting batch number=N ***": batch = N
  OVF_KIND_NONE = 9,         // a None value at label_id
  OVF_KIND_NOT_TENSOR = 10,  // a non-tensor value at label_id
  OVF_KIND_STEP = 11,  // optimizer.step(): name_id "optimizer.step", label_id the optimizer's class
  OVF_KIND_STEP_PARAM = 12,  // a parameter non-finite after that step: label_id "module.path.name"
  OVF_KIND_BUFFER = 13,      // a module's buffer that turned non-finite in its forward (BatchNorm's
                         // running_var): standalone; label_id = its path, context_id = the module
  // A loss scaler's update (GradScaler.update()) that skipped the step or changed
  // the scale (layout 4): name_id its class, label_id the first parameter whose
  // gradient was non-finite (OVF_NO_ID: none), scale_before / scale_after,
  // skips_in_row and cause_seq. A skip is NONFINITE and deliberate (CONSTANT).
  OVF_KIND_SCALER = 14,
  // An early warning (layout 5): the run heads for a NaN/Inf it has not made yet.
  // Module growth: name_id the module path, label_id its class, dtype its output's,
  // abs_max the output's abs max this batch, scale_before the previous batch's,
  // scale_after the dtype's largest value, skips_in_row the batches left at this
  // growth, cause_seq the module's FRAME. Optimizer step: name_id the optimizer's
  // class, label_id the parameter with the largest update, abs_max the update-to-
  // weight ratio |dw|/|w| over all its parameters, scale_before that parameter's
  // own ratio, scale_after the threshold (control.update_ratio_max).
  OVF_KIND_WARNING = 15,
};

// Tensor element types as the runtime sees them (independent of torch's enum).
enum ovf_dtype {
  OVF_DTYPE_UNKNOWN = 0,
  OVF_DTYPE_FLOAT64 = 1,
  OVF_DTYPE_FLOAT32 = 2,
  OVF_DTYPE_FLOAT16 = 3,
  OVF_DTYPE_BFLOAT16 = 4,
  OVF_DTYPE_COMPLEX64 = 5,
  OVF_DTYPE_COMPLEX128 = 6,
  OVF_DTYPE_INT64 = 7,
  OVF_DTYPE_INT32 = 8,
  OVF_DTYPE_INT16 = 9,
  OVF_DTYPE_INT8 = 10,
  OVF_DTYPE_UINT8 = 11,
  OVF_DTYPE_BOOL = 12,
  OVF_DTYPE_FLOAT8_E4M3 = 13,
  OVF_DTYPE_FLOAT8_E5M2 = 14,
  OVF_DTYPE_UINT16 = 15,  // torch >= 2.3
  OVF_DTYPE_UINT32 = 16,
  OVF_DTYPE_UINT64 = 17,
};

enum ovf_record_flags {
  OVF_FLAG_HAS_STATS = 1u << 0,  // the stats fields are meaningful
  OVF_FLAG_NONFINITE = 1u << 1,  // nan + pos_inf + neg_inf > 0 (lines); any line (frames)
  OVF_FLAG_EMPTY = 1u << 2,      // a tensor with zero elements
  OVF_FLAG_NO_DATA = 1u << 3,    // a tensor whose data cannot be read here (meta, sparse, ...)
  OVF_FLAG_TRUNCATED = 1u << 4,  // frame: more values than the per-frame line cap
  OVF_FLAG_ROOT = 1u << 5,       // frame: the watched model's top-level forward
  OVF_FLAG_TRACED = 1u << 6,     // frame: in a batch listed in trace_batches
  // 1u << 7: unused. Written by runtimes of layout 3 before 0.1.0's pip release on weight
  // lines whose statistics were reused while the version counter stood still, which
  // writes through .data do not move: weights are read at every forward now.
  OVF_FLAG_UNUSED_7 = 1u << 7,
  OVF_FLAG_PRODUCER = 1u << 8,   // non-finite output while every input (and weight) was finite
  OVF_FLAG_CARRIER = 1u << 9,    // an input (or weight) was already non-finite
  OVF_FLAG_BACKWARD = 1u << 10,  // OP_OUTPUT: an op run by autograd's backward pass
  // Deliberate NaN/Inf, not an error: an op's from a constant argument (a
  // scalar, a 0-dim tensor: masked_fill(mask, -inf), isfinite's inf) or made
  // from constants alone (log(tril(ones))); a module's -inf mask input whose
  // outputs stay finite; any line written inside ovf.expected_nonfinite().
  OVF_FLAG_CONSTANT = 1u << 11,
  // Line: a device computes its statistics and they have not arrived yet (fast
  // device mode); the stats fields are zero until the runtime rewrites the record.
  // FRAME: it holds such a line, so no event was judged for it yet.
  OVF_FLAG_PENDING = 1u << 12,
  // FRAME: written from inside a torch.compile'd graph (ovf's custom op): the
  // ATen ops Inductor fused into its kernels ran unseen in it.
  OVF_FLAG_COMPILED = 1u << 13,
  // Line: made non-finite inside a region where that is expected (GradScaler's
  // scaled backward and unscale_, ovf.expected_nonfinite()), so also CONSTANT;
  // an op's diagnosis_id still says why (layout 4).
  OVF_FLAG_EXPECTED = 1u << 14,
  // Line: cast_counts hold what casts to the narrow types would lose (layout 6;
  // control.observe has OVF_OBSERVE_CAST, the dtype is floating).
  OVF_FLAG_CAST = 1u << 15,
  // Written by the replay of a step at a module event (layout 8): the step's forward
  // run again with its ops observed, to name the op that made the event's value.
  // Such records decide nothing (no event, no first value); the event's FRAME
  // points at the producing one (cause_seq).
  OVF_FLAG_REPLAY = 1u << 16,
};

// One record: a frame header or one tensor line. `seq` is written last (release)
// after the slot was first marked OVF_NO_SEQ, so a reader that finds a seq other
// than the one the slot should hold knows the slot is torn or overwritten.
typedef struct ovf_record {
  uint64_t seq;              // 0   this record's sequence number
  uint64_t frame_seq;        // 8   seq of the FRAME record this line belongs to
  uint64_t batch;            // 16  batch number in which the record was written
  uint64_t timestamp_ns;     // 24  CLOCK_REALTIME, to order events across ranks
  uint32_t name_id;          // 32  FRAME: module path; CHECKPOINT: ctx (string table)
  uint32_t label_id;         // 36  FRAME: class name; lines: "weight", "input[0]", ...
  uint8_t kind;              // 40  enum ovf_record_kind
  uint8_t dtype;             // 41  enum ovf_dtype
  uint8_t device_type;       // 42  0 cpu, 1 cuda, 255 other
  int8_t device_index;       // 43  -1 when not applicable
  uint32_t flags;            // 44  enum ovf_record_flags
  uint64_t numel;            // 48
  uint64_t nan_count;        // 56
  uint64_t pos_inf_count;    // 64
  uint64_t neg_inf_count;    // 72
  uint64_t zero_count;       // 80
  double abs_min;            // 88  min |x| over finite x (+inf when none finite)
  double abs_max;            // 96  max |x| over finite x (0 when none finite)
  double abs_min_nonzero;    // 104 min |x| over finite non-zero x (+inf when none)
  uint64_t subnormal_count;  // 112 finite non-zero |x| below the dtype's smallest normal
  uint32_t
      context_id;   // 120 OP_OUTPUT, GRAD: innermost module path running the op (OVF_NO_ID: none)
  uint32_t aux_id;  // 124 backward OP_OUTPUT: the forward op whose gradient this is;
                    //     a forward one that carried the first NaN/Inf in: the
                    //     parameter whose .grad held it (made in an unwatched backward)
  uint32_t headroom_dtype;  // 128 lines: enum ovf_dtype headroom is measured against (0: none)
  uint32_t
      headroom_underflow;  // 132 lines: finite non-zero |x| below its smallest normal (saturating)
  uint32_t diagnosis_id;   // 136 producing OP_OUTPUT: why, in one line ("aten::log of 16 zeros
                           //     (-inf)"); OVF_NO_ID: nothing said
  uint32_t location_id;    // 140 backward OP_OUTPUT: where the forward op ran ("train.py:16 in f")
  // Layout 4 (zero in earlier layouts):
  double scale_before;    // 144 SCALER: the loss scale before the update (WARNING: see its kind)
  double scale_after;     // 152 SCALER: ... and after
  uint64_t cause_seq;     // 160 SCALER: the first record a producing op (or gradient) made
                          //     non-finite in the scaled backward before the skip;
                          //     OVF_NO_SEQ: none observed (module mode sees no backward op).
                          //     FRAME of a module event (layout 8), STEP of an optimizer
                          //     event: the producing op's record its replay found
                          //     (OVF_FLAG_REPLAY)
  uint32_t skips_in_row;  // 168 SCALER: skipped steps in a row, this one included (0: no skip)
  // Layout 6: lines flagged OVF_FLAG_CAST; index ovf_cast_target * 3 + ovf_cast_loss.
  uint32_t cast_counts[(int)OVF_CAST_TARGETS * (int)OVF_CAST_LOSSES];  // 172
  // Layout 7: which rows of the line's first dimension (a batch's, usually) hold
  // its NaN/Inf values. Measured only for the session's first non-finite line
  // whose memory the runtime reads (row_extent 0: not measured).
  uint32_t row_extent;           // 220 the first dimension's size
  uint32_t row_count;            // 224 rows holding a NaN or an Inf
  uint32_t rows[OVF_ROWS_KEPT];  // 228 the first of them, ascending (min(row_count, 6) used)
  // Layout 8: a producing OP_OUTPUT's verdict, in one line: the op re-run on its own
  // inputs, on its device and in float64 ("finite in float64 ...: float32's range here");
  // OVF_NO_ID: none given (zero bytes, read as none, in earlier layouts). The FRAME
  // of a module event (the STEP of an optimizer event): its replay's line ("replayed
  // ...", or why it named no op: "not replayed: ...").
  uint32_t verdict_id;  // 252; the last of OVF_RECORD_SIZE's bytes: a field more makes
                        //      the record longer (a new record_size, the version bumped)
} ovf_record;

// The part of the state a debugger may write (and only this part). The runtime
// reads it at every hook; a debugger writes the fields, then bumps `generation`
// so cached decisions (the module filter) are recomputed.
enum ovf_stop_bits {
  OVF_STOP_NAN = 1u << 0,          // a NaN in any line of a frame
  OVF_STOP_INF = 1u << 1,          // an Inf in any line of a frame
  OVF_STOP_ABOVE = 1u << 2,        // a line's abs_max > above
  OVF_STOP_BELOW = 1u << 3,        // a line's non-zero abs min < below
  OVF_STOP_TRACED = 1u << 4,       // every frame of a traced batch
  OVF_STOP_ABORT_AFTER = 1u << 5,  // batch counter passed abort_after_batch
  // Modifier: NAN/INF events only where the value is produced (OVF_FLAG_PRODUCER),
  // or at the first non-finite value ever seen, not where it is carried onward.
  OVF_STOP_PRODUCER_ONLY = 1u << 6,
  OVF_STOP_BACKWARD = 1u << 7,  // a NaN/Inf in a backward op's output (needs OVF_OBSERVE_BACKWARD)
  // A loss scaler gave up (layout 4): control.scaler_max_skips skipped steps in a
  // row, or a skip took the scale below control.scale_floor.
  OVF_STOP_SCALER = 1u << 8,
  // An early warning (layout 5): a module's output abs max grows fast enough to
  // pass its dtype's largest value within control.early_horizon batches, or an
  // optimizer step's update-to-weight ratio exceeds control.update_ratio_max.
  OVF_STOP_EARLY = 1u << 9,
  // A line's cast to control.cast_target would lose more than a limit (layout 6):
  // the share of its elements that overflow, flush to zero or turn subnormal
  // above control.cast_overflow_max, cast_flush_max or cast_subnormal_max.
  OVF_STOP_CAST = 1u << 10,
  // A stop on a line of the step replayed for `ovf step-into` (layout 9): not an
  // event of the run; the header's step_state and step_where_id say where.
  OVF_STOP_STEP = 1u << 11,
};

// What a debugger asks of the runtime at a stop (control.step_request, layout 9),
// read when the stop hook returns: step into the replayed step, then move in it.
enum ovf_step_request {
  OVF_STEP_NONE = 0,    // go on: at a line of the replay, that ends it (back at the event)
  OVF_STEP_INTO = 1,    // at an event: replay the step, stop at the producing module's first line
  OVF_STEP_NEXT = 2,    // the next line in this function (or its caller's, once it returns)
  OVF_STEP_STEP = 3,    // the next line anywhere, into the functions it calls
  OVF_STEP_FINISH = 4,  // the next line once this function has returned
};

// Where the runtime is with a debugger's stepping (header step_state, layout 9).
enum ovf_step_state {
  OVF_STEPPING_NONE = 0,      // not at a stop ovf_step_request applies to
  OVF_STEPPING_AT_EVENT = 1,  // at an event whose replay named the op: OVF_STEP_INTO applies
  OVF_STEPPING_AT_LINE = 2,   // at a line of the replayed step (OVF_STOP_STEP)
  OVF_STEPPING_RETURNED = 3,  // the producing module's forward returns in the replay
  OVF_STEPPING_ENDED = 4,     // back at the event after a replay; step_where_id says how it went
  OVF_STEPPING_REFUSED = 5,   // back at the event: the replay could not step (step_where_id: why)
};

// What the runtime observes beyond module forwards (control.observe).
enum ovf_observe_bits {
  OVF_OBSERVE_OPS = 1u << 0,       // every ATen op's outputs, in the forward pass
  OVF_OBSERVE_BACKWARD = 1u << 1,  // every ATen op run by the backward pass
  OVF_OBSERVE_OPTIMIZER_STATE =
      1u << 2,                 // after a step, the optimizer's state tensors too (Adam's moments)
  OVF_OBSERVE_CAST = 1u << 3,  // every floating line counts what casts would lose (cast_counts)
  // Before each optimizer step, a copy of the parameters it updates and of its state:
  // a value the step writes can be replayed (the STEP record's verdict_id / cause_seq).
  OVF_OBSERVE_CAPTURE_OPTIMIZER = 1u << 4,
};

// What the runtime does after it called the stop hook for an event.
enum ovf_on_event {
  OVF_ON_EVENT_RAISE = 0,     // the reference's behaviour: report, raise ValueError
  OVF_ON_EVENT_WARN = 1,      // report once, keep training
  OVF_ON_EVENT_ABORT = 2,     // report, then abort() so the kernel writes a core
  OVF_ON_EVENT_WAIT = 3,      // report, print attach commands, wait for a debugger
  OVF_ON_EVENT_CONTINUE = 4,  // a debugger handles events: just call the stop hook
};

// How device tensors' statistics reach the host (header device_mode).
enum ovf_device_mode {
  OVF_DEVICE_MODE_NONE = 0,   // no session yet
  OVF_DEVICE_MODE_FAST = 1,   // no host sync in the hook: a frame is judged when its
                              // statistics arrive (next hook, at the latest the next batch)
  OVF_DEVICE_MODE_EXACT = 2,  // one sync per frame: the stop is inside the frame
};

// Which device backends computed statistics (header device_backends).
enum ovf_device_backend_bits {
  OVF_BACKEND_PORTABLE = 1u << 0,       // ATen ops on the tensor's device
  OVF_BACKEND_CUDA = 1u << 1,           // ovf's fused CUDA kernels
  OVF_BACKEND_CUDA_REJECTED = 1u << 2,  // the first-use self-check disagreed: portable from then on
  OVF_BACKEND_CUDA_BUILT = 1u << 3,     // this runtime holds the CUDA backend (kernels and glue)
  OVF_BACKEND_NO_CUDA_DEVICE = 1u << 4,  // ... and torch sees no CUDA device in this process
};

typedef struct ovf_control {
  uint32_t generation;        // +0   bumped by the writer after a change
  uint32_t enabled;           // +4   0: hooks return at once
  uint32_t stop_mask;         // +8   enum ovf_stop_bits
  uint32_t on_event;          // +12  enum ovf_on_event
  double above;               // +16  OVF_STOP_ABOVE threshold
  double below;               // +24  OVF_STOP_BELOW threshold
  int64_t after_batch;        // +32  events only in batches >= this
  int64_t abort_after_batch;  // +40  -1: off
  uint32_t trace_count;       // +48  entries used in trace_batches
  uint32_t wait_released;     // +52  WAIT mode: a debugger sets 1 to let the run go on
  int64_t trace_batches[OVF_MAX_TRACE_BATCHES];  // +56
  char module_glob[OVF_GLOB_SIZE];  // +312 fnmatch pattern on the module path; "" = all
  uint32_t observe;                 // +568 enum ovf_observe_bits
  uint32_t headroom_dtype;          // +572 enum ovf_dtype lines measure headroom against (0: off)
  uint32_t scaler_max_skips;        // +576 OVF_STOP_SCALER after this many skips in a row (0: off)
  uint32_t early_horizon;           // +580 OVF_STOP_EARLY: growth that passes the limit within
                                    //      this many batches (0: growth not followed; layout 5)
  double scale_floor;       // +584 OVF_STOP_SCALER when a skip leaves the scale below (0: off)
  double update_ratio_max;  // +592 OVF_STOP_EARLY: an optimizer step's |dw|/|w| above (0: off)
  // Layout 6: OVF_STOP_CAST. A limit is a share of a line's elements (0..1); a
  // negative one is off, 0 stops at the first element lost.
  uint32_t cast_target;       // +600 enum ovf_cast_target the limits are for
  uint32_t reserved_cast;     // +604 zero
  double cast_overflow_max;   // +608
  double cast_flush_max;      // +616
  double cast_subnormal_max;  // +624
  // Layout 9: a debugger's request at a stop (enum ovf_step_request); the runtime
  // sets it back to OVF_STEP_NONE before it stops again.
  uint32_t step_request;                     // +632
  uint8_t reserved[OVF_CONTROL_SIZE - 636];  // room to grow
} ovf_control;

// The event snapshot: where the program was when the value was made, taken
// when an event fires (before the stop hook), read by `ovf py-bt` and
// `ovf py-locals` in any debugger and from cores. Strings are ids of the
// string table. Its own layout version; `event_seq` says which event it shows
// (a reader compares it with last_event_seq); `complete` is written last.
#define OVF_SNAPSHOT_MAGIC 0x50414e532d46564fULL  // "OVF-SNAP"
#define OVF_SNAPSHOT_VERSION 2u  // 2: 256 locals and frame_locals (1: 64, no count)
#define OVF_SNAPSHOT_FRAMES 64u
#define OVF_SNAPSHOT_LOCALS 256u  // 35 KB in all, written only at an event
#define OVF_SNAPSHOT_DIMS 8u

enum ovf_snapshot_frame_flags {
  OVF_SNAP_USER = 1u << 0,  // the innermost frame of the program's own code: its locals follow
};

enum ovf_snapshot_local_flags {
  OVF_SNAP_TENSOR = 1u << 0,           // a torch.Tensor: dtype, device, shape and stats are set
  OVF_SNAP_HAS_STATS = 1u << 1,        // its memory was read (a CPU tensor of a known dtype)
  OVF_SNAP_SHAPE_TRUNCATED = 1u << 2,  // more than OVF_SNAPSHOT_DIMS dimensions
  OVF_SNAP_VALUE = 1u << 3,            // an int, float, bool or short str: value_id holds its text
};

typedef struct ovf_snapshot_frame {
  uint32_t file_id;      // 0  the code's file
  uint32_t function_id;  // 4  the code's name
  int32_t line;          // 8  the line running
  uint32_t flags;        // 12 enum ovf_snapshot_frame_flags
} ovf_snapshot_frame;

typedef struct ovf_snapshot_local {
  uint32_t name_id;     // 0
  uint32_t type_id;     // 4   the value's type name (never its repr: no program code runs)
  uint32_t flags;       // 8   enum ovf_snapshot_local_flags
  uint8_t dtype;        // 12  enum ovf_dtype
  uint8_t device_type;  // 13  as in ovf_record
  int8_t device_index;  // 14
  uint8_t ndim;         // 15
  union {
    int64_t shape[OVF_SNAPSHOT_DIMS];  // 16  a tensor's
    uint64_t value_id;                 // 16  OVF_SNAP_VALUE: the value's text, interned
  };
  uint64_t numel;          // 80
  uint64_t nan_count;      // 88
  uint64_t pos_inf_count;  // 96
  uint64_t neg_inf_count;  // 104
  uint64_t zero_count;     // 112
  double abs_min;          // 120 over finite values, as in ovf_record
  double abs_max;          // 128
} ovf_snapshot_local;

typedef struct ovf_snapshot {
  uint64_t magic;         // 0   OVF_SNAPSHOT_MAGIC
  uint32_t version;       // 8   OVF_SNAPSHOT_VERSION
  uint32_t size;          // 12  sizeof(ovf_snapshot)
  uint64_t event_seq;     // 16  the record of the event it was taken at
  uint32_t frame_count;   // 24  frames[0] is the innermost
  uint32_t local_count;   // 28  locals of the frame flagged OVF_SNAP_USER
  uint32_t complete;      // 32  1 once every field above is written (0 while it is)
  uint32_t thread_id;     // 36  the OS thread that made the value
  uint32_t frame_locals;  // 40  the user frame's locals, kept or not (v2)
  uint8_t reserved[20];   // 44  room to grow
  ovf_snapshot_frame frames[OVF_SNAPSHOT_FRAMES];  // 64
  ovf_snapshot_local locals[OVF_SNAPSHOT_LOCALS];  // 64 + 16 * 64 = 1088
} ovf_snapshot;

// The samples log (layout 7): the dataset indices a DataLoader's sampler gave
// the last OVF_SAMPLES_ENTRIES batches, so that an event, `ovf samples` and a
// core name the samples behind a NaN. Indices only, never data. Entry k (the
// k-th published, from 0) lives in entries[k % OVF_SAMPLES_ENTRIES]; its
// `number` is k + 1 once complete (0 while it is written), so a reader skips a
// torn or reused entry. Its own layout version; `entries_written` counts them.
#define OVF_SAMPLES_MAGIC 0x4c504d532d46564fULL  // "OVF-SMPL"
#define OVF_SAMPLES_VERSION 1u
#define OVF_SAMPLES_ENTRIES 16u
#define OVF_SAMPLES_PER_ENTRY 64u

typedef struct ovf_samples_entry {
  uint64_t batch;       // 0  the batch (training step) the samples went into
  uint64_t total;       // 8  how many samples the batch held
  uint32_t dataset_id;  // 16 the dataset's class name (string table)
  uint32_t count;       // 20 indices kept: the batch's first min(total, 64), in its order
  uint64_t number;      // 24 k + 1 once the entry is complete; 0 while it is written
  int64_t indices[OVF_SAMPLES_PER_ENTRY];  // 32
} ovf_samples_entry;

typedef struct ovf_samples_log {
  uint64_t magic;                                  // 0  OVF_SAMPLES_MAGIC
  uint32_t version;                                // 8  OVF_SAMPLES_VERSION
  uint32_t size;                                   // 12 sizeof(ovf_samples_log)
  uint64_t entries_written;                        // 16 entries published so far
  uint8_t reserved[40];                            // 24 room to grow
  ovf_samples_entry entries[OVF_SAMPLES_ENTRIES];  // 64
} ovf_samples_log;

// The exported state. Addresses are absolute in the process that wrote them.
typedef struct ovf_state_t {
  uint64_t magic;            // 0    OVF_MAGIC once initialised
  uint32_t layout_version;   // 8
  uint32_t header_size;      // 12   OVF_HEADER_SIZE
  uint32_t record_size;      // 16   OVF_RECORD_SIZE
  uint32_t record_capacity;  // 20   a power of two
  uint64_t records_addr;     // 24   ovf_record[record_capacity]
  uint64_t write_seq;        // 32   records reserved so far (next seq)
  uint64_t batch;            // 40   the batch counter (the reference's batch_number)
  uint64_t
      first_nonfinite_seq;    // 48   first line with NaN/Inf since the session began, or OVF_NO_SEQ
  uint64_t last_event_seq;    // 56   FRAME seq of the latest stop event, or OVF_NO_SEQ
  uint64_t names_index_addr;  // 64   uint32 pairs {offset, length} into the arena
  uint64_t names_arena_addr;  // 72   bytes
  uint32_t names_capacity;    // 80   entries in the index
  uint32_t names_count;       // 84   entries written (an entry is complete before it counts)
  uint32_t names_arena_size;  // 88
  uint32_t names_arena_used;  // 92
  int32_t pid;                // 96
  int32_t rank;               // 100  RANK, -1 when not distributed
  int32_t local_rank;         // 104  LOCAL_RANK, -1
  int32_t world_size;         // 108  WORLD_SIZE, 1
  int32_t device_index;       // 112  -1: cpu
  uint32_t runtime_version;   // 116  major << 16 | minor << 8 | patch
  uint32_t detection_state;   // 120  0 off, 1 watching, 2 non-finite seen
  uint32_t max_frames_to_save;     // 124  the report's frame count
  uint32_t last_event_kind;        // 128  enum ovf_stop_bits of the latest event
  uint32_t frames_per_batch_hint;  // 132  frames the last complete batch had
  uint64_t frames_written;         // 136  FRAME records so far
  uint64_t start_time_ns;          // 144  CLOCK_REALTIME at initialisation
  uint32_t root_class_id;          // 152  class name of the watched model (OVF_NO_ID: none), for
                                   //      "<root Classifier>" where a module path is empty
  uint32_t own_on_event;           // 156  enum ovf_on_event the process chose itself (raise, warn,
                          //      ...): restored when the debugger that set control.on_event
                          //      to CONTINUE is gone (detached or killed)
  uint64_t snapshot_addr;  // 160  ovf_snapshot: the Python stack and locals at the latest
                           //      event (0: none taken)
  // Layout 3: statistics computed on the tensor's device (all zero when no
  // device tensor was seen, and in layouts 1 and 2).
  uint32_t device_mode;      // 168  enum ovf_device_mode of the session
  uint32_t device_backends;  // 172  enum ovf_device_backend_bits: the backends that ran
  uint32_t pending_frames;   // 176  frames whose device statistics have not arrived
  uint32_t last_event_late;  // 180  1: the latest event was judged after its frame had
                             //      returned (fast mode): the stack is where the process
                             //      was when the statistics arrived, not the frame's
  // Layout 7 (0 in earlier layouts):
  uint64_t samples_addr;  // 184  ovf_samples_log: the dataset indices of the last batches
                          //      (0: no DataLoader batch was seen)
  // Layout 9 (0 in earlier layouts): stepping in a replayed step.
  uint32_t step_state;     // 192  enum ovf_step_state
  uint32_t step_where_id;  // 196  "model.py:45 in forward (...)": the line of a step stop, or
                           //      how the replay went (OVF_NO_ID: none)
  uint8_t reserved0[OVF_CONTROL_OFFSET - 200];
  ovf_control control;  // 256
  uint8_t reserved1[OVF_HEADER_SIZE - OVF_CONTROL_OFFSET - OVF_CONTROL_SIZE];
} ovf_state_t;

// The symbol readers look for.
extern ovf_state_t ovf_state;

// The stop hook. The runtime calls it for every event the control block asks
// for; debuggers put their breakpoint here. `record` is the FRAME (or line)
// that caused the event, `event` one bit of enum ovf_stop_bits.
void ovf_stop_event(const ovf_record* record, uint32_t event);

#ifdef __cplusplus
}  // extern "C"

// Every offset above, pinned (the C++ compilers of the runtime and the tests
// check them; the plugin decodes the same numbers).
#include "ring_offsets.h"
#endif

#endif  // OVF_RING_H
