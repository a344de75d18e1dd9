// An --if expression in Python mode: Monitor's event filter calls the Python
// callable the condition module compiled (py_hooks.h: set_event_condition).
#include <pybind11/pybind11.h>

#include "monitor.h"
#include "py_hooks.h"

namespace py = pybind11;

namespace ovf {
namespace {
py::object* g_event_condition = nullptr;  // lives for the process, like the hooks

// Monitor's event filter: the Python callable decides. It runs where the event
// happened (an autograd thread too); an error in it keeps the event.
bool python_event_filter(uint64_t seq, uint32_t events) {
  if (g_event_condition == nullptr || !Py_IsInitialized()) return true;
  py::gil_scoped_acquire gil;
  try {
    return (*g_event_condition)(seq, events).cast<bool>();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("ovf: the --if expression");
    return true;
  }
}
}  // namespace

void set_event_condition(py::object condition) {
  if (condition.is_none()) {
    Monitor::instance().set_event_filter(nullptr);
    return;
  }
  if (g_event_condition == nullptr) g_event_condition = new py::object();
  *g_event_condition = std::move(condition);
  Monitor::instance().set_event_filter(&python_event_filter);
}

}  // namespace ovf
