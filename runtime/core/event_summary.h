// A process's first NaN/Inf in a few hundred bytes of JSON, for job-wide
// verdicts: a job of thousands of ranks cannot be judged by reading thousands of
// rings, so each rank leaves this beside the job's logs at its first event and
// `python3 -m ovf.ranks DIR` judges the job from these alone (which rank produced
// the value first, which ranks only carried it), reading rings only where it says.
#ifndef OVF_EVENT_SUMMARY_H
#define OVF_EVENT_SUMMARY_H

#include <cstdint>
#include <string>

#include "ovf/ring.h"

namespace ovf {

// The summary format's version (the "ovf_event_summary" field).
constexpr int kEventSummaryVersion = 1;

// Where this process's summary goes: a directory ("" = nowhere, the default).
// Set before the run (ovf.enable's event_dir, OVF_EVENT_DIR, --event-dir).
void set_event_summary_dir(const std::string& dir);
std::string event_summary_dir();

// "producer": the first non-finite value was made here from finite values (an op's
// or a module's output, a gradient, a buffer a forward wrote); "carrier": it arrived
// (a parameter or gradient already non-finite -- what a collective or an optimizer
// step delivers --, a module's input, an op's input made where ovf did not look).
const char* nonfinite_role(const ovf_record& first);

// The JSON document for the first non-finite record `first` of an event `events`
// (OVF_STOP_* bits) at the user's `line` ("model.py:88 in forward", "" unknown), one
// line ending in "\n". Every text is escaped as ovf prints it (report.h's
// escape_text), then as JSON.
std::string event_summary_json(const ovf_record& first, uint32_t events, const std::string& line);

// Writes `text` to dir/name as a new file: never replaces one (the name is taken
// only once the whole text is written, by a hard link). "" or one line saying why not.
std::string write_new_file(const std::string& dir, const std::string& name,
                           const std::string& text);

// Once per process, at its first NaN/Inf event, where a directory is set: the file
// ovf-event-[rank<R>-]<host>-<pid>.json. `event_seq`: the event's first record (its
// snapshot names the user's line). A failure is one line on stderr; the run goes
// on as it would have.
void write_event_summary(uint32_t events, uint64_t event_seq);

}  // namespace ovf

#endif
