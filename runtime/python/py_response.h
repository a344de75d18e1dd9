// The Python driver's side of the response step (py_response.cpp), for the hooks.
#ifndef OVF_PY_RESPONSE_H
#define OVF_PY_RESPONSE_H

#include <pybind11/pybind11.h>

#include <string>

#include "ovf/ring.h"
#include "response.h"

namespace ovf {

// NonFiniteError and EarlyWarningError, the classes ovf raises (set once).
void set_error_classes(pybind11::object nonfinite_error, pybind11::object early_warning_error);
PyObject* nonfinite_error_class();

// sys.stdout.write and flush (a report must not wait in a buffer).
void write_stdout(const std::string& text);

// Prints the response's text, then does what it says: raise (a Python
// exception set, py::error_already_set thrown), abort, wait for a debugger.
void act(const Response& out);

// A raise decided at an op, not delivered there: raised by the next hook.
void raise_pending();

// The op observer's handler in Python programs (set_op_event_handler).
void on_op_event(const ovf_record& record, uint32_t events);

// While held, a raise decided at an op stays pending (for the next hook, or the
// exit status) instead of reaching the thread asynchronously: the session's end
// judging what waited, a compiled graph's nodes run again (then raised at once).
void hold_op_raises(bool held);

}  // namespace ovf

#endif  // OVF_PY_RESPONSE_H
