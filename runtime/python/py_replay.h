// The replay at a module event (_replay.py drives it; monitor.h: set_replay_hook).
#ifndef OVF_PY_REPLAY_H
#define OVF_PY_REPLAY_H

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

namespace ovf {

// `replay(frame_seq, batch, compiled) -> str` runs at a module event that holds the first
// NaN/Inf and returns the replay's line (how it went, or why it did not run);
// None: no replay.
void set_replay(pybind11::object replay);
// The replay's forward begins: its records decide nothing, its ops are observed
// (`backward`: those of a backward it runs too, named by their forward ops).
// It ends when `replay` returns (a second pass begins nothing more).
void begin_replay(bool backward);
bool replaying();
// `step(frame_seq) -> str` replays the step once more for a debugger's `ovf step-into`
// (its line: how the pass went); None: no stepping.
void set_step(pybind11::object step);
// A stop at a line of that pass: `frame` (a Python frame) is where; `where` its text
// for the debugger; `state` enum ovf_step_state. Returns the debugger's request
// (enum ovf_step_request): OVF_STEP_NONE where there is no debugger.
uint32_t step_stop(pybind11::handle frame, const std::string& where, uint32_t state);
// The replay has seen the op that made its first non-finite value (its device
// ops' statistics waited for).
bool replay_found();
// (op, module path, "file.py:LINE in FUNC") of the replay's producing op (None where
// unknown), or None before it is seen.
pybind11::object replay_producer();

}  // namespace ovf

#endif  // OVF_PY_REPLAY_H
