// What a Python process does about the core's responses (monitor.h): prints
// the report, raises NonFiniteError (or EarlyWarningError), aborts or waits for a
// debugger; at an op, where nothing can throw, asynchronously.
#include "py_response.h"

#include <string>

#include "monitor.h"
#include "op_observer.h"
#include "response.h"

namespace py = pybind11;

namespace ovf {

// NonFiniteError: a bare instance carries the reference's message (raised asynchronously
// after an op, by class).
static py::object* g_nonfinite_error = nullptr;
// EarlyWarningError: raised at an early warning (--early), before any inf/nan.
static py::object* g_early_warning_error = nullptr;

// Flushed at once: a report is rare, and the process may end right after it without
// flushing (a DataLoader worker whose error ends it: its report was lost in the pipe).
void write_stdout(const std::string& text) {
  if (text.empty()) return;
  py::object out = py::module_::import("sys").attr("stdout");
  out.attr("write")(text);
  out.attr("flush")();
}

// Flushes Python's stdout and stderr. Python delivers a pending Ctrl-C inside
// such a call: that KeyboardInterrupt is set again (PyErr) and reported (true),
// for a wait it must end -- swallowed, the wait after it never saw it and lasted
// until a debugger came. Other failures to flush are not the program's concern.
static bool flush_stdio() {
  auto sys = py::module_::import("sys");
  for (const char* stream : {"stdout", "stderr"}) {
    try {
      sys.attr(stream).attr("flush")();
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_KeyboardInterrupt)) {
        e.restore();
        return true;
      }
    }
  }
  return false;
}

static double g_wait_timeout_s =
    0;  // wait mode: how long to wait for a debugger (0: until one comes)

// Wait mode: until a debugger releases the process, Ctrl-C (its
// KeyboardInterrupt is then set), or the timeout, which says so and goes on.
static WaitEnd wait_in_python() {
  if (flush_stdio()) return WaitEnd::kInterrupted;
  const WaitEnd end = wait_for_release([] { return PyErr_CheckSignals() != 0; }, g_wait_timeout_s);
  if (end == WaitEnd::kTimedOut) {
    write_stdout("ovf: no debugger released the process within " +
                 py::str(py::float_(g_wait_timeout_s)).cast<std::string>() +
                 " s (--wait-timeout); training goes on\n");
  }
  return end;
}

// Prints the response's text, then does what it says. Raising is the only way
// ovf's own decisions leave this function as an exception.
void act(const Response& out) {
  write_stdout(out.text);
  switch (out.action) {
    case Action::kNone: return;
    case Action::kRaise:
      PyErr_SetString(out.events & (OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_SCALER)
                          ? g_nonfinite_error->ptr()
                      : out.events & OVF_STOP_EARLY ? g_early_warning_error->ptr()
                                                    : PyExc_ValueError,
                      out.message.c_str());
      throw py::error_already_set();
    case Action::kAbort: flush_stdio(); abort_now(out.message);
    case Action::kWait:
      // Ctrl-C ends the wait as a KeyboardInterrupt where the model runs.
      if (wait_in_python() == WaitEnd::kInterrupted) throw py::error_already_set();
      return;
  }
}

// A raise decided at an op, not delivered there: raised by the next hook.
void raise_pending() {
  uint64_t batch = 0;
  if (!Monitor::instance().take_pending_raise(&batch)) return;
  PyErr_SetString(g_nonfinite_error->ptr(), kOverflowMessage);
  throw py::error_already_set();
}

// Raises `type` in this thread as soon as it runs Python code again (the op
// returns to the line that called it). Only a thread that runs Python can.
static bool raise_asynchronously(PyObject* type) {
  return PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), type) == 1;
}

// The op observer's handler in Python programs: the core's response, carried
// out at the op, which runs with the GIL released more often than not. An op
// cannot throw: a raise reaches the program as an asynchronous exception of
// NonFiniteError (a bare one carries the reference's message) right after the op,
// or at the next hook on a thread that runs no Python.
// Set while a raise decided at an op must stay pending (hold_op_raises): while the
// session's end judges what waited (flush_device_frames), for the exit status, not
// raised into the exit handler; while a compiled graph's nodes run again
// (_compile_ops.py), raised by the check itself when they are done.
static bool g_raises_held = false;

void on_op_event(const ovf_record& record, uint32_t events) {
  const bool python_thread = PyGILState_GetThisThreadState() != nullptr;
  py::gil_scoped_acquire gil;
  try {
    const Response response = Monitor::instance().respond_to_op(record, events);
    write_stdout(response.text);
    if (response.action == Action::kAbort) {
      flush_stdio();
      abort_now(response.message);
    }
    if (response.action == Action::kWait && wait_in_python() == WaitEnd::kInterrupted) {
      PyErr_Clear();
      if (python_thread) raise_asynchronously(PyExc_KeyboardInterrupt);
    }
    uint64_t batch = 0;
    if (python_thread && !g_raises_held && Monitor::instance().take_pending_raise(&batch) &&
        !raise_asynchronously(g_nonfinite_error->ptr())) {
      PyErr_SetString(PyExc_RuntimeError, "ovf: the raise could not be delivered");
      throw py::error_already_set();
    }
  } catch (const py::error_already_set& e) {
    PyErr_Clear();  // printing failed (a closed stdout): the event stays in the ring
  }
}

void set_error_classes(py::object nonfinite_error, py::object early_warning_error) {
  // They live for the process, like the hooks.
  g_nonfinite_error = new py::object(nonfinite_error);
  g_early_warning_error = new py::object(early_warning_error);
}

PyObject* nonfinite_error_class() { return g_nonfinite_error->ptr(); }

void set_wait_timeout(double seconds) { g_wait_timeout_s = seconds > 0 ? seconds : 0; }

void hold_op_raises(bool held) { g_raises_held = held; }

}  // namespace ovf
