// The response step: what the process itself does about a non-finite event
// when no debugger handles it (control.on_event), for every driver.
#ifndef OVF_RESPONSE_H
#define OVF_RESPONSE_H

#include <cstdint>
#include <functional>
#include <string>

struct ovf_record;

namespace ovf {

enum class Action {
  kNone,
  kRaise,  // raise the error in `message` now (NonFiniteError: a ValueError)
  kAbort,  // flush output, then abort_now(message): the kernel writes a core with the ring in it
  kWait,   // wait_for_release(): a debugger lets the process go on
};

// What a driver does after a record was committed: print `text` (for module
// frames exactly what the reference prints at that moment), then act.
struct Response {
  std::string text;
  Action action = Action::kNone;
  std::string message;
  uint32_t events = 0;  // enum ovf_stop_bits that fired
};

// The reference's ValueError text.
extern const char* const kOverflowMessage;

// abort()'s message: why ("non-finite value detected"), where the core goes and
// how to read it.
std::string abort_message(const std::string& what = "non-finite value detected");

// "ovf: process P is waiting for a debugger. Attach with one of: ..." lines.
std::string attach_instructions(int pid);

// Prints `message` on stderr after flushing every stdio stream, then abort()s.
[[noreturn]] void abort_now(const std::string& message);

enum class WaitEnd { kReleased, kInterrupted, kTimedOut };

// Polls control.wait_released every 100 ms until a debugger sets it (then
// clears it), `interrupted()` returns true, or `timeout_s` (> 0) passed.
WaitEnd wait_for_release(const std::function<bool()>& interrupted, double timeout_s = 0);

// What the process does about an event: control.on_event, except that a
// CONTINUE set by a debugger that is gone (no tracer: detached, or killed at a
// stop) gives way to the process's own choice (ovf_state.own_on_event).
uint32_t effective_on_event();

// Calls ovf_stop_event(record, events), where a debugger's breakpoint stops
// the process, only while a tracer is attached: a debugger killed with
// SIGKILL leaves its breakpoint's trap instruction in the code, and reaching
// it without a tracer would kill the training with SIGTRAP.
void reach_stop_hook(const ovf_record* record, uint32_t events);

// Lifts the soft core-size limit to the hard one; false when cores stay off.
bool enable_core_dumps();

}  // namespace ovf

#endif  // OVF_RESPONSE_H
