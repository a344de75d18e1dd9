#include "py_hooks.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <functional>
#include <unordered_map>

#include "buffer_watch.h"
#include "control.h"
#include "gradients.h"
#include "module_stack.h"
#include "monitor.h"
#include "op_groups.h"
#include "op_observer.h"
#include "optimizer_check.h"
#include "parameters.h"
#include "py_response.h"
#include "py_snapshot.h"
#include "py_values.h"
#include "recent_stats.h"
#include "ring_writer.h"
#include "sample_log.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace ovf {
namespace {

struct ModuleEntry {
  py::object module;  // strong: a freed module's address must not be reused under its name
  uint32_t name_id = 0;
  uint32_t class_id = 0;
  bool step_root = false;  // its forward may begin a training step (step_clock.h)
  BufferWatch buffers;
};

std::unordered_map<PyObject*, ModuleEntry>& modules() {
  static auto* m = new std::unordered_map<PyObject*, ModuleEntry>();
  return *m;
}
PyObject* g_root = nullptr;
// Python-side callback for a module called that ovf has not named yet (auto mode).
py::object* g_discover = nullptr;
// Fast device mode: ops and frames whose statistics arrived since are judged
// first (their events may raise here, in a later hook); the ops first, as
// they ran before the frame that returns their values.
void poll_device_frames() {
  poll_op_groups();
  act(Monitor::instance().poll_device_frames(/*can_raise=*/true));
}

FrameBuilder& frame_builder() {
  static thread_local FrameBuilder builder;
  return builder;
}

bool running() { return Monitor::instance().active() && read_control(ovf_state.control.enabled); }

void watch_output_gradients(uint32_t module_id, PyObject* output) {
  auto watch = [module_id](PyObject* value, const std::string& label) {
    if (THPVariable_Check(value))
      watch_output_gradient(THPVariable_Unpack(value), module_id, label);
  };
  if (PyTuple_Check(output) || PyList_Check(output)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(output);
    for (Py_ssize_t i = 0; i < n; ++i)
      watch(PySequence_Fast_ITEMS(output)[i], "output[" + std::to_string(i) + "]");
  } else {
    watch(output, "output");
  }
}

// How a forward's inputs and outputs become lines: every tensor in them (keyword
// inputs, lists, dicts, dataclasses), or what the reference's hooks see.
enum class ValueView { kFull, kReference };

// The forward hook body shared by the hooks with and without kwargs, and the
// compiled path's (frame_flags OVF_FLAG_COMPILED).
void on_forward(PyObject* module, PyObject* args, PyObject* kwargs, PyObject* output,
                uint32_t frame_flags = 0, ValueView view = ValueView::kFull) {
  const uint64_t forward_start = pop_module(module);
  if (!running() || Monitor::instance().replaying()) return;  // a replay's ops speak for it
  raise_pending();
  poll_device_frames();
  sync_op_observer();
  auto it = modules().find(module);
  if (it == modules().end()) return;  // not part of a watched model
  ModuleEntry& entry = it->second;
  FrameBuilder& frame = frame_builder();
  frame.begin(entry.name_id, entry.class_id, module == g_root, forward_start, frame_flags);
  if (view == ValueView::kFull) frame.inputs_may_be_masks();
  for_each_own_parameter(entry.module.ptr(), [&](const char* name, const at::Tensor& t) {
    // Read at every forward: a parameter's version counter misses writes through .data
    // (a hand-written SGD, foreach optimizers), so a cached statistic could be stale.
    add_tensor_line(frame, OVF_KIND_WEIGHT, intern(name), t);
  });
  std::string label = "input";
  if (args != nullptr && PyTuple_Check(args)) {
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; ++i) {
      label = "input[" + std::to_string(i) + "]";
      if (view == ValueView::kReference) {
        add_value_as_reference(frame, OVF_KIND_INPUT, PyTuple_GET_ITEM(args, i), label, 0);
      } else {
        add_python_value(frame, OVF_KIND_INPUT, PyTuple_GET_ITEM(args, i), label, 1);
      }
    }
  } else if (args != nullptr) {
    add_python_value(frame, OVF_KIND_INPUT, args, label, 0);
  }
  if (kwargs != nullptr && PyDict_Check(kwargs)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      label = "input" + key_label(key);
      add_python_value(frame, OVF_KIND_INPUT, value, label, 1);
    }
  }
  label = "output";
  if (view == ValueView::kReference) {
    add_value_as_reference(frame, OVF_KIND_OUTPUT, output, label, 2);
  } else {
    add_python_value(frame, OVF_KIND_OUTPUT, output, label, 0);
  }
  // Buffers the forward updated (BatchNorm's running statistics): a standalone
  // record where one turned non-finite, before the frame that may carry it.
  for_each_own_buffer(entry.module.ptr(), [&](const char* name, const at::Tensor& t) {
    ovf_record record;
    if (const uint32_t events = entry.buffers.check(entry.name_id, name, t, &record)) {
      act(Monitor::instance().respond_to_op(record, events));
    }
  });
  raise_pending();
  if (read_control(ovf_state.control.observe) & OVF_OBSERVE_BACKWARD)
    watch_output_gradients(entry.name_id, output);
  act(Monitor::instance().finish_frame(frame));
  // Outside every forward that a pre-hook began (the root's): nothing of this
  // call's values is read again as a later call's.
  if (innermost_module() == OVF_NO_ID) forget_recent_stats();
}

// One line, whatever the error's text holds (pybind11 appends a traceback).
void report_internal_error(const char* what) {
  std::string text(what);
  text = text.substr(0, text.find('\n'));
  ovf_state.control.enabled = 0;
  py::print(
      py::str("ovf: internal error in a hook ({}); ovf is now disabled for this run").format(text),
      py::arg("file") = py::module_::import("sys").attr("stderr"));
}

// Runs a hook body; an internal failure of ovf disables it with one line instead
// of breaking the user's training step.
template <typename Body>
void guarded(Body&& body) {
  try {
    body();
  } catch (const py::error_already_set& e) {
    if (e.matches(nonfinite_error_class()) || e.matches(PyExc_ValueError) ||
        e.matches(PyExc_KeyboardInterrupt) || e.matches(PyExc_SystemExit)) {
      throw;
    }
    report_internal_error(e.what());
  } catch (const std::exception& e) {
    report_internal_error(e.what());
  }
}

std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
}

// A sharded parameter (FSDP2's DTensor) holds this rank's values in its local
// shard; the DTensor itself dispatches to Python and is not read.
at::Tensor local_values(py::handle tensor) {
  const at::Tensor& t = THPVariable_Unpack(tensor.ptr());
  if (!t.unsafeGetTensorImpl()->is_python_dispatch() || !py::hasattr(tensor, "_local_tensor"))
    return t;
  const py::object local = tensor.attr("_local_tensor");
  return THPVariable_Check(local.ptr()) ? THPVariable_Unpack(local.ptr()) : t;
}

void check_optimizer(py::handle optimizer) {
  if (!running()) return;
  raise_pending();
  // The ops before the step (its backward) are judged before its own check,
  // which waits: the step's write must not read as the first NaN.
  flush_op_groups_unlocked();
  poll_device_frames();
  StepCheck check(type_name(optimizer));
  size_t index = 0;
  // Its state (Adam's exp_avg, exp_avg_sq, ...) when asked: more reads per step.
  py::object state = py::none();
  if (check_optimizer_state()) state = optimizer.attr("state");
  for (py::handle group : optimizer.attr("param_groups")) {
    for (py::handle p : group["params"]) {
      const size_t i = index++;
      if (!THPVariable_Check(p.ptr())) continue;
      const at::Tensor& t = THPVariable_Unpack(p.ptr());
      PyObject* slots = PyDict_Check(state.ptr()) ? PyDict_GetItem(state.ptr(), p.ptr()) : nullptr;
      if (slots != nullptr && PyDict_Check(slots)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(slots, &pos, &key, &value)) {
          const char* slot = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
          if (slot == nullptr) {
            PyErr_Clear();
            continue;
          }
          if (THPVariable_Check(value)) check.state(t, i, slot, local_values(value));
        }
      }
      const py::object grad = p.attr("grad");
      check.parameter(t, i, local_values(p),
                      THPVariable_Check(grad.ptr()) ? local_values(grad) : at::Tensor());
    }
  }
  check.finish();
}

}  // namespace

void set_python_callbacks(py::object discover, py::object nonfinite_error,
                          py::object early_warning_error) {
  // They live for the process, like the hooks.
  g_discover = discover.is_none() ? nullptr : new py::object(discover);
  set_error_classes(nonfinite_error, early_warning_error);
  set_op_event_handler(&on_op_event);
  install_python_snapshot();
}

void forward_hook(py::handle module, py::handle args, py::handle kwargs, py::handle output) {
  guarded([&] { on_forward(module.ptr(), args.ptr(), kwargs.ptr(), output.ptr()); });
}

void forward_hook_positional(py::handle module, py::handle args, py::handle output) {
  guarded([&] {
    on_forward(module.ptr(), args.ptr(), nullptr, output.ptr(), 0, ValueView::kReference);
  });
}

// A frame inside a torch.compile'd graph (_compile.py's ovf::module_frame op):
// its record says so, because the ops Inductor fused around it ran unseen. A
// function of its own, so that eager hooks carry no argument for it. Keyword
// arguments do not reach it (the op passes positional tensors only).
void compiled_forward_hook(py::handle module, py::handle args, py::handle output) {
  guarded([&] { on_forward(module.ptr(), args.ptr(), nullptr, output.ptr(), OVF_FLAG_COMPILED); });
}

// In auto mode (global) the first call of a module ovf has not named asks
// Python to name it and its submodules (it becomes a root). It notes where the
// forward began (a producer frame made its NaN itself, not a child) and which
// module runs (the op observer names it).
void forward_pre_hook(py::handle module, py::handle /*args*/) {
  // A replay runs the step again: only which module runs is noted (its ops name it).
  const bool replaying = Monitor::instance().replaying();
  auto it = modules().find(module.ptr());
  if (it == modules().end() && g_discover != nullptr && !replaying) {
    guarded([&] { (*g_discover)(module); });
    it = modules().find(module.ptr());
  }
  if (it == modules().end()) return;
  if (!replaying) {
    if (module.ptr() == g_root) {
      clear_modules_on_thread();  // drops entries of forwards that raised
      forget_recent_stats();      // a forward that raised never reached its last frame
      Monitor::instance().begin_root_forward();
      raise_pending();
      if (running()) guarded([] { poll_device_frames(); });
    }
    // After a raise pending from the step before: it is that step's.
    if (it->second.step_root)
      Monitor::instance().begin_step_root_forward(it->second.name_id, at::GradMode::is_enabled(),
                                                  python_location());
    // The data a loader returned since the last root forward went into this batch.
    if (module.ptr() == g_root || it->second.step_root) claim_pending_samples(ovf_state.batch);
  }
  push_module(module.ptr(), it->second.name_id,
              __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE));
}

void watch_module(py::handle module, const std::string& name, bool is_root, bool step_root) {
  ModuleEntry& entry = modules()[module.ptr()];
  entry.module = py::reinterpret_borrow<py::object>(module);
  entry.name_id = intern(name);
  entry.class_id = intern(type_name(module));
  entry.step_root = step_root;
  entry.buffers.clear();
  if (is_root) {
    g_root = module.ptr();
    ovf_state.root_class_id = entry.class_id;
  }
  for_each_own_parameter(module.ptr(), [&](const char* param, const at::Tensor& t) {
    // the first name wins, as for shared modules in named_modules()
    register_parameter(t, entry.name_id,
                       intern(name.empty() ? std::string(param) : name + "." + param));
  });
}

void set_op_site(py::handle module_name, const std::string& location, py::handle gradient_of) {
  auto id_of = [](const std::string& text) { return text.empty() ? OVF_NO_ID : intern(text); };
  const bool backward = !gradient_of.is_none();
  ovf::set_op_site(module_name.is_none() ? OVF_NO_ID : intern(module_name.cast<std::string>()),
                   id_of(location), backward,
                   backward ? id_of(gradient_of.cast<std::string>()) : OVF_NO_ID);
}

py::object watched_name(py::handle module) {
  const auto it = modules().find(module.ptr());
  if (it == modules().end()) return py::none();
  return py::str(std::string(interned(it->second.name_id)));
}

void flush_op_groups_unlocked() {
  py::gil_scoped_release release;
  flush_op_groups();
}

bool is_watched(py::handle module) { return modules().count(module.ptr()) > 0; }

void clear_modules() {
  modules().clear();
  clear_parameters();
  g_root = nullptr;
}

void after_optimizer_step(py::handle optimizer) {
  guarded([&] { check_optimizer(optimizer); });
}

void act_in_session(const std::function<Response()>& decide) {
  guarded([&] {
    if (running()) act(decide());
  });
}

void deliver_pending_raise() {
  if (running()) raise_pending();
}

bool detect_overflow(py::handle var, const std::string& ctx) {
  if (!THPVariable_Check(var.ptr())) {
    throw py::type_error("ovf.detect_overflow: var must be a torch.Tensor, got " + type_name(var));
  }
  if (running()) guarded([] { poll_device_frames(); });
  std::string text;
  const ovf_record line = tensor_line(OVF_KIND_CHECKPOINT, 0, THPVariable_Unpack(var.ptr()));
  const bool found =
      !(line.flags & OVF_FLAG_NO_DATA) && Monitor::instance().checkpoint(line, ctx, &text);
  write_stdout(text);
  return found;
}

int flush_device_frames() {
  int status = 0;
  guarded([&status] {
    try {
      {
        struct Flushing {  // reset however the flush ends (Ctrl-C in a wait)
          Flushing() { hold_op_raises(true); }
          ~Flushing() { hold_op_raises(false); }
        } flushing;
        flush_op_groups_unlocked();
      }
      act(Monitor::instance().flush_device_frames(/*can_raise=*/false));
      act(Monitor::instance().answer_unanswered_step());
    } catch (const py::error_already_set& e) {
      if (!e.matches(PyExc_KeyboardInterrupt)) throw;
      PyErr_Clear();
      status = 130;  // the shell's status of a program Ctrl-C ended
      return;
    }
    uint64_t batch = 0;
    if (Monitor::instance().take_pending_raise(&batch)) status = 1;
  });
  return status;
}

}  // namespace ovf
