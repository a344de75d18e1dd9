// The replay at a module event, the driver's half (monitor_replay.cpp is the
// monitor's): the runtime calls _replay.py's function inside the event, before
// the stop hook; it runs the batch root's forward again between begin_replay()
// and the end here, with the op observer armed for it. Whatever the replay does,
// the run's own state comes back: the control block's ops, this thread's module
// stack (an aborted replay leaves entries), the monitor's replay flag.
#include "py_replay.h"

#include "control.h"
#include "module_stack.h"
#include "monitor.h"
#include "op_observer.h"
#include "py_hooks.h"
#include "ring_writer.h"

namespace py = pybind11;

namespace ovf {
namespace {

py::object* g_replay = nullptr;  // _replay.py's run(frame_seq, batch, compiled) -> str
uint32_t g_observe_before = 0;   // control.observe outside the replay

// One line, whatever pybind11 appended.
std::string first_line(const char* what) {
  std::string text(what);
  return text.substr(0, text.find('\n'));
}

void run_replay(uint64_t frame_seq, uint64_t batch, bool compiled) {
  if (g_replay == nullptr) return;
  py::gil_scoped_acquire gil;
  const ModuleStackMark mark = mark_modules();
  std::string said;
  try {
    said = (*g_replay)(frame_seq, batch, compiled).cast<std::string>();
  } catch (const std::exception& e) {
    said = "not replayed: ovf's replay failed (" + first_line(e.what()) + ")";
  }
  return_to_mark(mark);
  Monitor& monitor = Monitor::instance();
  if (monitor.replaying()) {
    ovf_state.control.observe = g_observe_before;
    sync_op_observer();
  }
  monitor.end_replay(frame_seq, said);
}

}  // namespace

void set_replay(py::object replay) {
  delete g_replay;
  g_replay = replay.is_none() ? nullptr : new py::object(std::move(replay));
  Monitor::instance().set_replay_hook(g_replay != nullptr ? &run_replay : nullptr);
}

void begin_replay() {
  if (Monitor::instance().replaying()) return;  // a second pass (--on-nan pdb): armed already
  g_observe_before = read_control(ovf_state.control.observe);
  Monitor::instance().begin_replay();
  ovf_state.control.observe = g_observe_before | OVF_OBSERVE_OPS;
  sync_op_observer();
}

bool replaying() { return Monitor::instance().replaying(); }

py::object replay_producer() {
  const ovf_record* r = find_record(Monitor::instance().replay_producer_seq());
  if (r == nullptr) return py::none();
  auto text = [](uint32_t id) -> py::object {
    return id == OVF_NO_ID ? py::object(py::none()) : py::str(std::string(interned(id)));
  };
  return py::make_tuple(text(r->name_id), text(r->context_id), text(r->location_id));
}

bool replay_found() {
  // Device ops are judged when their statistics arrive (fast mode): the replay
  // waits for its own (once a run) before it says what it found.
  if (Monitor::instance().replaying()) flush_op_groups_unlocked();
  return Monitor::instance().replay_found();
}

}  // namespace ovf
