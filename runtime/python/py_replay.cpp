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
#include "py_snapshot.h"
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

py::object* g_step = nullptr;  // _replay_step.py's run(frame_seq) -> str

// Calls a pass of the replay (`call` returns its line; `failed` prefixes an error's)
// and puts back what an aborted pass leaves: module stack entries, the ops armed.
template <typename Call>
std::string run_pass(Call call, const char* failed) {
  py::gil_scoped_acquire gil;
  const ModuleStackMark mark = mark_modules();
  std::string said;
  try {
    said = call().template cast<std::string>();
  } catch (const std::exception& e) {
    said = failed + first_line(e.what()) + ")";
  }
  return_to_mark(mark);
  if (Monitor::instance().replaying()) {
    ovf_state.control.observe = g_observe_before;
    sync_op_observer();
  }
  return said;
}

void run_replay(uint64_t frame_seq, uint64_t batch, bool compiled) {
  if (g_replay == nullptr) return;
  const std::string said = run_pass([&] { return (*g_replay)(frame_seq, batch, compiled); },
                                    "not replayed: ovf's replay failed (");
  Monitor::instance().end_replay(frame_seq, said);
}

std::string run_step(uint64_t frame_seq) {
  if (g_step == nullptr) return "";
  const std::string said =
      run_pass([&] { return (*g_step)(frame_seq); }, "ovf's replay for stepping failed (");
  Monitor::instance().end_replay_pass();
  return said;
}

}  // namespace

void set_replay(py::object replay) {
  delete g_replay;
  g_replay = replay.is_none() ? nullptr : new py::object(std::move(replay));
  Monitor::instance().set_replay_hook(g_replay != nullptr ? &run_replay : nullptr);
}

void begin_replay(bool backward) {
  if (Monitor::instance().replaying()) return;  // a second pass (--on-nan pdb): armed already
  g_observe_before = read_control(ovf_state.control.observe);
  Monitor::instance().begin_replay();
  ovf_state.control.observe =
      g_observe_before | OVF_OBSERVE_OPS | (backward ? OVF_OBSERVE_BACKWARD : 0u);
  sync_op_observer();
}

void set_step(py::object step) {
  delete g_step;
  g_step = step.is_none() ? nullptr : new py::object(std::move(step));
  Monitor::instance().set_step_hook(g_step != nullptr ? &run_step : nullptr);
}

uint32_t step_stop(py::handle frame, const std::string& where, uint32_t state) {
  const uint64_t event_seq = ovf_state.last_event_seq;
  ovf_state.step_where_id = intern(where);
  ovf_state.step_state = state;
  snapshot_frame(frame.ptr(), event_seq);  // `ovf py-locals`: this frame's live locals
  ovf_state.control.step_request = OVF_STEP_NONE;
  reach_stop_hook(find_record(event_seq), OVF_STOP_STEP);
  return read_control(ovf_state.control.step_request);
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
