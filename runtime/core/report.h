// The reference's text report (transformers.debug_utils), character for character.
#ifndef OVF_REPORT_H
#define OVF_REPORT_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ovf/ring.h"

namespace ovf {

// Python's format(x, "8.2e"): "nan" never "-nan", "inf", "-inf".
std::string format_8_2e(double x);

// printf's "%.2e" (1.28e+06), as why-lines and verdicts give magnitudes.
std::string format_2e(double x);

// printf's "%g" (Python's format(x, "g") for finite x): 65536, 0.5, 1.5e+20;
// `digits` significant digits ("%.3g": 3.4e+38).
std::string format_g(double x, int digits = 6);

// The two values the reference prints for a tensor line: torch's abs().min()
// and abs().max(), which propagate NaN and include infinities.
struct ReferenceMinMax {
  double min, max;
};
ReferenceMinMax reference_min_max(const ovf_record& line);

// Control characters (C0, C1, DEL), bidirectional controls and backslashes as
// escapes, so a hostile module name can neither drive the terminal nor reorder
// what is printed around it. Printable text passes unchanged.
std::string escape_text(std::string_view text);

// A module path for people, escaped: the watched model itself (path "") as
// "<root Class>"; `none` for OVF_NO_ID.
std::string module_name(uint32_t id, const char* none);

// One record as the reference prints it (a frame header, a tensor line, a batch
// marker); the string table resolves ids.
std::string format_record(const ovf_record& r);

// The reference's column header line.
extern const char* const kColumnHeader;  // "abs min  abs max  metadata"

// Frames as the reference keeps them: each FRAME with its lines, and the batch
// markers written since the previous frame, joined by "\n".
std::string format_frames(const std::vector<const ovf_record*>& records);

// The last `max_frames` frames with seq in [floor_seq, end_seq), walked back
// through the ring, oldest first, in ring order; CHECKPOINT, OP_OUTPUT and
// optimizer STEP records are not part of the reference's frames and are skipped. `frames_found`
// receives the count.
std::vector<const ovf_record*> last_frames(uint64_t floor_seq, uint64_t end_seq,
                                           uint32_t max_frames, uint32_t* frames_found);

// Where the first non-finite value came from, when the reference's frames
// cannot say: an op (op observer) or an optimizer step. One line ending in
// "\n", or "" when the first non-finite value is a module's (then what its
// replay found, if it ran: describe_replay).
std::string describe_first_nonfinite();
// A module line's replay (its FRAME's verdict_id and cause_seq, _replay.py): how
// it went, then the op it names as describe_nonfinite does; "" when none ran.
std::string describe_replay(const ovf_record& line);
// The same for any record `r`, as "ovf: <what> was produced by ..." (nullptr: "").
std::string describe_nonfinite(const ovf_record* r, const std::string& what);

// Why a loss scaler's update stopped (OVF_STOP_SCALER, a SCALER record): its
// skips and scale, and what its first skip of the run found non-finite
// (report_scaler.cpp).
std::string describe_scaler_stop(const ovf_record& update);

// "ovf: GradScaler had skipped 9 steps (the last at batch 8); its scale is 131072\n"
// for an event's report where the ring holds a loss scaler's records in [start, end); "" else.
std::string describe_scaler_history(uint64_t start, uint64_t end);

// An early warning (a WARNING record) in one line ending in "\n": the module
// whose output grows toward its dtype's limit and when it passes it, or the
// optimizer step whose update was too large for its weights (report_early.cpp).
std::string describe_early_warning(const ovf_record& warning);

// How a carried first non-finite value reached its op: " by the gradient of
// fc.weight: it was made in the backward pass, which ovf did not watch (...)"
// for a parameter's gradient (interned path `gradient_of`), else where from.
std::string carried_from(uint32_t gradient_of);

// One op record (OP_OUTPUT, or a CHECKPOINT as format_record has it) as
// `ovf frames --ops` prints it (plugin: report.format_op).
std::string format_op(const ovf_record& r);

// The last `max` OP_OUTPUT / CHECKPOINT records in [floor, end), oldest first.
std::vector<const ovf_record*> last_ops(uint64_t floor_seq, uint64_t end_seq, uint32_t max);

// What ovf does not see in torch.compile'd code (plugin: compiled.UNSEEN).
extern const char* const kCompiledUnseen;

// "ovf: K of N frames listed ran in torch.compile'd graphs: <kCompiledUnseen>\n"
// when K of the listed `records` (last_frames: N frames) are FRAMEs flagged
// OVF_FLAG_COMPILED; "" when none is.
std::string compiled_note(const std::vector<const ovf_record*>& records, uint32_t frames);

// What a process prints at an event it acts on: the reference's detection
// report, one line when some of its frames came from compiled code, the last
// op records before the event (when ops were observed), and where the first
// non-finite value came from -- or, at a loss scaler's stop, why it gave up --
// and what a loss scaler did this session (since seq `session_start`).
std::string format_event_report(uint64_t batch_number, uint64_t floor_seq, uint64_t end_seq,
                                uint32_t max_frames, uint64_t session_start);

// "\nDetected inf/nan during batch_number=N\nLast K forward frames:\n..." exactly
// as DebugUnderflowOverflow.dump_saved_frames prints it.
std::string format_detection_report(uint64_t batch_number, uint64_t floor_seq, uint64_t end_seq,
                                    uint32_t max_frames);

}  // namespace ovf

#endif  // OVF_REPORT_H
