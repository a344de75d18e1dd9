// The pybind11 module `ovf._ovf`: module forward hooks and the Python-facing
// controls. The only translation unit of the runtime that includes torch
// headers; everything it learns about a tensor it hands on as ovf::TensorView.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <unistd.h>

#include <cstring>
#include <sys/resource.h>
#include <unordered_map>

#include "ovf/module_stack.h"
#include "ovf/monitor.h"
#include "ovf/op_observer.h"
#include "ovf/report.h"
#include "ovf/ring_writer.h"
#include "ovf/torch_tensor.h"
#include "ovf/version.h"

namespace py = pybind11;

namespace {

using ovf::add_tensor_line;
using ovf::DeviceId;
using ovf::device_of;
using ovf::readable_view;
using ovf::Stats;
using ovf::TensorView;

// Structures nested deeper than this are reported as "not a tensor".
constexpr int kMaxDepth = 8;

// ------------------------------------------------------------------ modules

struct ParamCache {
  const void* impl = nullptr;
  const void* data = nullptr;
  int64_t version = -1;
  Stats stats;
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  DeviceId device;
  ovf_dtype headroom_against = OVF_DTYPE_UNKNOWN;  // what `underflow` was counted against
  uint64_t underflow = 0;
};

struct ModuleEntry {
  py::object module;  // strong: a freed module's address must not be reused under its name
  uint32_t name_id = 0;
  uint32_t class_id = 0;
  std::unordered_map<uint32_t, ParamCache> params;  // by parameter label id
};

// Parameter -> "module.path.name" for the optimizer check, filled as modules
// are watched. Keyed by TensorImpl: the same parameter object across steps.
std::unordered_map<const void*, uint32_t>& parameter_labels() {
  static auto* m = new std::unordered_map<const void*, uint32_t>();
  return *m;
}

std::unordered_map<PyObject*, ModuleEntry>& modules() {
  static auto* m = new std::unordered_map<PyObject*, ModuleEntry>();
  return *m;
}
PyObject* g_root = nullptr;
// torch < 2.0 passes no kwargs to forward hooks; ovf's nn.Module.__call__ shim
// pushes (module, kwargs) here around each call that has kwargs.
py::list* g_kwargs_stack = nullptr;
// Python-side callback for a module called that ovf has not named yet (auto mode).
py::object* g_discover = nullptr;
py::object* g_nonfinite_error = nullptr;

uint32_t label_id(const std::string& text) { return ovf::intern(text); }

// Weights: the module's own parameters, stats reused while a parameter's
// version counter, storage and identity are unchanged.
// Calls fn(name, tensor) for each tensor a module holds in its own _parameters,
// in registration order; None entries (a bias=False) are skipped, as
// named_parameters() skips them.
template <typename Fn>
void for_each_own_parameter(PyObject* module, Fn&& fn) {
  PyObject* params = PyObject_GetAttrString(module, "_parameters");
  if (params == nullptr) {
    PyErr_Clear();
    return;
  }
  py::object owner = py::reinterpret_steal<py::object>(params);
  if (!PyDict_Check(params)) return;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(params, &pos, &key, &value)) {
    if (!THPVariable_Check(value)) continue;
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    if (name == nullptr) {
      PyErr_Clear();
      continue;
    }
    fn(name, THPVariable_Unpack(value));
  }
}

void add_weights(ovf::FrameBuilder& frame, ModuleEntry& entry) {
  for_each_own_parameter(entry.module.ptr(), [&](const char* name, const at::Tensor& t) {
    const uint32_t label = label_id(name);
    TensorView view;
    if (!readable_view(t, &view)) {
      frame.add_value(OVF_KIND_WEIGHT, label, OVF_FLAG_NO_DATA);
      return;
    }
    const int64_t version = t.is_inference() ? -1 : static_cast<int64_t>(t._version());
    ParamCache& cache = entry.params[label];
    const bool fresh = version >= 0 && cache.impl == t.unsafeGetTensorImpl() && cache.data == view.data &&
                       cache.version == version;
    if (!fresh) {
      cache.impl = t.unsafeGetTensorImpl();
      cache.data = view.data;
      cache.version = version;
      cache.stats = ovf::compute_stats_cpu(view);
      cache.dtype = view.dtype;
      cache.device = device_of(t);
    }
    frame.add_stats(OVF_KIND_WEIGHT, label, cache.stats, cache.dtype, cache.device,
                    fresh ? OVF_FLAG_WEIGHT_CACHED : 0);
    const ovf_dtype against = ovf::headroom_dtype();
    if (against != OVF_DTYPE_UNKNOWN) {
      if (!fresh || cache.headroom_against != against) {
        cache.underflow = ovf::headroom_underflow(view, against);
        cache.headroom_against = against;
      }
      frame.set_headroom(against, cache.underflow);
    }
  });
}

std::string key_label(PyObject* key) {
  if (PyUnicode_Check(key)) {
    const char* s = PyUnicode_AsUTF8(key);
    if (s != nullptr) return std::string("[\"") + s + "\"]";
    PyErr_Clear();
  }
  PyObject* r = PyObject_Repr(key);
  if (r == nullptr) {
    PyErr_Clear();
    return "[?]";
  }
  py::object owner = py::reinterpret_steal<py::object>(r);
  const char* s = PyUnicode_AsUTF8(r);
  if (s == nullptr) {
    PyErr_Clear();
    return "[?]";
  }
  return std::string("[") + s + "]";
}

bool is_dataclass_instance(PyObject* obj) {
  return PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(obj)), "__dataclass_fields__");
}

// One value of a frame under `label`: a tensor line, a None / not-a-tensor line,
// or the lines of its elements for tuples, lists, dicts and dataclasses.
void add_value(ovf::FrameBuilder& frame, ovf_record_kind kind, PyObject* obj, std::string& label, int depth) {
  if (frame.full()) {
    frame.add_value(kind, 0);  // flags the frame truncated
    return;
  }
  if (THPVariable_Check(obj)) {
    add_tensor_line(frame, kind, label_id(label), THPVariable_Unpack(obj));
    return;
  }
  if (obj == Py_None) {
    frame.add_value(OVF_KIND_NONE, label_id(label));
    return;
  }
  const size_t base = label.size();
  if (depth < kMaxDepth && (PyTuple_Check(obj) || PyList_Check(obj))) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject** items = PySequence_Fast_ITEMS(obj);
    for (Py_ssize_t i = 0; i < n; ++i) {
      label += "[" + std::to_string(i) + "]";
      add_value(frame, kind, items[i], label, depth + 1);
      label.resize(base);
    }
    return;
  }
  if (depth < kMaxDepth && PyDict_Check(obj)) {
    // Copy the items first: a value's __repr__ could mutate the dict.
    py::list items = py::reinterpret_steal<py::list>(PyDict_Items(obj));
    for (py::handle item : items) {
      label += key_label(PyTuple_GET_ITEM(item.ptr(), 0));
      add_value(frame, kind, PyTuple_GET_ITEM(item.ptr(), 1), label, depth + 1);
      label.resize(base);
    }
    return;
  }
  if (depth < kMaxDepth && is_dataclass_instance(obj)) {
    py::object fields = py::module_::import("dataclasses").attr("fields")(py::handle(obj));
    for (py::handle field : fields) {
      const std::string name = py::str(field.attr("name"));
      PyObject* value = PyObject_GetAttrString(obj, name.c_str());
      if (value == nullptr) {
        PyErr_Clear();
        continue;
      }
      py::object owner = py::reinterpret_steal<py::object>(value);
      label += "." + name;
      add_value(frame, kind, value, label, depth + 1);
      label.resize(base);
    }
    return;
  }
  frame.add_value(OVF_KIND_NOT_TENSOR, label_id(label));
}

void write_stdout(const std::string& text) {
  if (text.empty()) return;
  py::module_::import("sys").attr("stdout").attr("write")(text);
}

void flush_stdio() {
  auto sys = py::module_::import("sys");
  for (const char* stream : {"stdout", "stderr"}) {
    try {
      sys.attr(stream).attr("flush")();
    } catch (const py::error_already_set&) {
    }
  }
  fflush(nullptr);
}

// Prints the outcome's text, then does what it says. Raising is the only way
// ovf's own decisions leave this function as an exception.
void act(const ovf::Outcome& out) {
  write_stdout(out.text);
  switch (out.action) {
    case ovf::Action::kNone:
      return;
    case ovf::Action::kRaise:
      if (out.events & (OVF_STOP_NAN | OVF_STOP_INF)) {
        PyErr_SetString(g_nonfinite_error->ptr(), out.message.c_str());
      } else {
        PyErr_SetString(PyExc_ValueError, out.message.c_str());
      }
      throw py::error_already_set();
    case ovf::Action::kAbort:
      flush_stdio();
      fprintf(stderr, "%s\n", out.message.c_str());
      fflush(stderr);
      abort();
    case ovf::Action::kWait: {
      flush_stdio();
      volatile uint32_t* released = &ovf_state.control.wait_released;
      while (*released == 0) usleep(100 * 1000);
      *released = 0;
      return;
    }
  }
}

ovf::FrameBuilder& frame_builder() {
  static thread_local ovf::FrameBuilder builder;
  return builder;
}

// Backward observed: a hook on each output tensor that needs a gradient records
// that gradient under the module's name when autograd computes it. The hook
// lives with the tensor's autograd graph, freed with it.
void watch_output_gradients(uint32_t module_id, PyObject* output) {
  auto watch = [module_id](PyObject* value, const std::string& label) {
    if (!THPVariable_Check(value)) return;
    const at::Tensor& t = THPVariable_Unpack(value);
    if (!t.requires_grad()) return;
    const uint32_t label_id = ovf::intern("grad " + label);
    t.register_hook([module_id, label_id](const at::Tensor& grad) {
      TensorView view;
      if (!readable_view(grad, &view)) return;
      const Stats s = ovf::compute_stats_cpu(view);
      ovf_record r;
      std::memset(&r, 0, sizeof r);
      r.kind = OVF_KIND_GRAD;
      r.frame_seq = OVF_NO_SEQ;
      r.name_id = module_id;
      r.context_id = module_id;
      r.aux_id = OVF_NO_ID;
      r.label_id = label_id;
      r.dtype = view.dtype;
      const DeviceId device = device_of(grad);
      r.device_type = device.type;
      r.device_index = device.index;
      r.flags = OVF_FLAG_HAS_STATS | OVF_FLAG_BACKWARD | (s.nonfinite() ? OVF_FLAG_NONFINITE : 0);
      ovf::copy_stats(s, &r);
      ovf::Monitor::instance().gradient(r);
    });
  };
  if (PyTuple_Check(output) || PyList_Check(output)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(output);
    for (Py_ssize_t i = 0; i < n; ++i) {
      watch(PySequence_Fast_ITEMS(output)[i], "output[" + std::to_string(i) + "]");
    }
  } else {
    watch(output, "output");
  }
}

// The forward hook body shared by the hooks with and without kwargs.
void on_forward(PyObject* module, PyObject* args, PyObject* kwargs, PyObject* output) {
  const uint64_t forward_start = ovf::pop_module(module);
  ovf::Monitor& monitor = ovf::Monitor::instance();
  if (!monitor.active() || !ovf_state.control.enabled) return;
  ovf::sync_op_observer();
  auto it = modules().find(module);
  if (it == modules().end()) return;  // not part of a watched model
  ModuleEntry& entry = it->second;
  ovf::FrameBuilder& frame = frame_builder();
  frame.begin(entry.name_id, entry.class_id, module == g_root, forward_start);
  add_weights(frame, entry);
  std::string label = "input";
  if (args != nullptr && PyTuple_Check(args)) {
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; ++i) {
      label = "input[" + std::to_string(i) + "]";
      add_value(frame, OVF_KIND_INPUT, PyTuple_GET_ITEM(args, i), label, 1);
    }
  } else if (args != nullptr) {
    add_value(frame, OVF_KIND_INPUT, args, label, 0);
  }
  if (kwargs != nullptr && PyDict_Check(kwargs)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      label = "input" + key_label(key);
      add_value(frame, OVF_KIND_INPUT, value, label, 1);
    }
  }
  label = "output";
  add_value(frame, OVF_KIND_OUTPUT, output, label, 0);
  if (ovf_state.control.observe & OVF_OBSERVE_BACKWARD) watch_output_gradients(entry.name_id, output);
  act(monitor.finish_frame(frame));
}

// One line, whatever the error's text holds (pybind11 appends a traceback).
void report_internal_error(const char* what) {
  std::string text(what);
  text = text.substr(0, text.find('\n'));
  ovf_state.control.enabled = 0;
  py::print(py::str("ovf: internal error in a hook ({}); ovf is now disabled for this run").format(text),
            py::arg("file") = py::module_::import("sys").attr("stderr"));
}

// Runs a hook body; an internal failure of ovf disables it with one line instead
// of breaking the user's training step.
template <typename Body>
void guarded(Body&& body) {
  try {
    body();
  } catch (const py::error_already_set& e) {
    if (e.matches(g_nonfinite_error->ptr()) || e.matches(PyExc_ValueError) ||
        e.matches(PyExc_KeyboardInterrupt) || e.matches(PyExc_SystemExit)) {
      throw;
    }
    report_internal_error(e.what());
  } catch (const std::exception& e) {
    report_internal_error(e.what());
  }
}

PyObject* kwargs_for(PyObject* module) {
  if (g_kwargs_stack == nullptr || PyList_GET_SIZE(g_kwargs_stack->ptr()) == 0) return nullptr;
  PyObject* top = PyList_GET_ITEM(g_kwargs_stack->ptr(), PyList_GET_SIZE(g_kwargs_stack->ptr()) - 1);
  if (!PyTuple_Check(top) || PyTuple_GET_SIZE(top) != 2 || PyTuple_GET_ITEM(top, 0) != module) return nullptr;
  return PyTuple_GET_ITEM(top, 1);
}

void forward_hook(py::handle module, py::handle args, py::handle output) {
  guarded([&] { on_forward(module.ptr(), args.ptr(), kwargs_for(module.ptr()), output.ptr()); });
}

void forward_hook_with_kwargs(py::handle module, py::handle args, py::handle kwargs, py::handle output) {
  guarded([&] { on_forward(module.ptr(), args.ptr(), kwargs.ptr(), output.ptr()); });
}

// The forward pre-hook: in auto mode (global) the first call of a module ovf has
// not named asks Python to name it and its submodules (it becomes a root). It
// notes where the forward began (a producer frame made its NaN itself, not a
// child) and which module runs (the op observer names it).
void forward_pre_hook(py::handle module, py::handle /*args*/) {
  auto it = modules().find(module.ptr());
  if (it == modules().end() && g_discover != nullptr) {
    guarded([&] { (*g_discover)(module); });
    it = modules().find(module.ptr());
  }
  if (it == modules().end()) return;
  if (module.ptr() == g_root) ovf::clear_modules_on_thread();  // drops entries of forwards that raised
  ovf::push_module(module.ptr(), it->second.name_id, __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE));
}

void watch_module(py::handle module, const std::string& name, bool is_root) {
  ModuleEntry& entry = modules()[module.ptr()];
  entry.module = py::reinterpret_borrow<py::object>(module);
  entry.name_id = ovf::intern(name);
  entry.class_id = ovf::intern(py::str(module.get_type().attr("__name__")).cast<std::string>());
  entry.params.clear();
  if (is_root) g_root = module.ptr();
  for_each_own_parameter(module.ptr(), [&](const char* param, const at::Tensor& t) {
    // the first name wins, as for shared modules in named_modules()
    parameter_labels().emplace(t.unsafeGetTensorImpl(),
                               ovf::intern(name.empty() ? std::string(param) : name + "." + param));
  });
}

// After optimizer.step(): the parameters that came out non-finite, as one
// frame named after the optimizer. Reads each parameter once; writes a frame
// only when one is non-finite, so a healthy step costs one pass, no records.
void after_optimizer_step(py::handle optimizer) {
  ovf::Monitor& monitor = ovf::Monitor::instance();
  if (!monitor.active() || !ovf_state.control.enabled) return;
  ovf::FrameBuilder& frame = frame_builder();
  frame.begin(ovf::intern("optimizer.step"),
              ovf::intern(py::str(optimizer.get_type().attr("__name__")).cast<std::string>()), false);
  bool any = false, carried = false;
  size_t index = 0;
  // Its state (Adam's exp_avg, exp_avg_sq, ...) when asked: more reads per step.
  const bool with_state = ovf_state.control.observe & OVF_OBSERVE_OPTIMIZER_STATE;
  py::object state = py::none();
  if (with_state) state = optimizer.attr("state");
  for (py::handle group : optimizer.attr("param_groups")) {
    for (py::handle p : group["params"]) {
      const size_t i = index++;
      if (!THPVariable_Check(p.ptr())) continue;
      const at::Tensor& t = THPVariable_Unpack(p.ptr());
      auto label = parameter_labels().find(t.unsafeGetTensorImpl());
      const std::string name = label != parameter_labels().end()
                                   ? std::string(ovf::interned(label->second))
                                   : "param_groups[...]params[" + std::to_string(i) + "]";
      PyObject* slots = with_state && PyDict_Check(state.ptr()) ? PyDict_GetItem(state.ptr(), p.ptr()) : nullptr;
      if (slots != nullptr && PyDict_Check(slots)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(slots, &pos, &key, &value)) {
          TensorView slot_view;
          if (!THPVariable_Check(value) || !PyUnicode_Check(key)) continue;
          const at::Tensor& slot = THPVariable_Unpack(value);
          if (!readable_view(slot, &slot_view)) continue;
          const Stats slot_stats = ovf::compute_stats_cpu(slot_view);
          if (!slot_stats.nonfinite()) continue;
          const char* slot_name = PyUnicode_AsUTF8(key);
          if (slot_name == nullptr) {
            PyErr_Clear();
            continue;
          }
          frame.add_stats(OVF_KIND_STEP_PARAM, ovf::intern(name + " " + slot_name), slot_stats, slot_view.dtype,
                          device_of(slot));
          any = true;
        }
      }
      TensorView view;
      if (!readable_view(t, &view)) continue;
      const Stats s = ovf::compute_stats_cpu(view);
      if (!s.nonfinite()) continue;
      frame.add_stats(OVF_KIND_STEP_PARAM, ovf::intern(name), s, view.dtype, device_of(t));
      any = true;
      const at::Tensor& grad = t.grad();
      TensorView grad_view;
      if (grad.defined() && readable_view(grad, &grad_view) && ovf::compute_stats_cpu(grad_view).nonfinite()) {
        carried = true;  // the gradient brought the NaN/Inf: the step only applied it
      }
    }
  }
  if (any) monitor.optimizer_step(frame, carried);
}

void clear_modules() {
  modules().clear();
  parameter_labels().clear();
  g_root = nullptr;
}

py::dict stats_dict(const Stats& s) {
  py::dict d;
  d["has_stats"] = s.has_stats;
  d["numel"] = s.numel;
  d["nan"] = s.nan_count;
  d["pos_inf"] = s.pos_inf_count;
  d["neg_inf"] = s.neg_inf_count;
  d["zero"] = s.zero_count;
  d["subnormal"] = s.subnormal_count;
  d["abs_min"] = s.abs_min;
  d["abs_max"] = s.abs_max;
  d["abs_min_nonzero"] = s.abs_min_nonzero;
  return d;
}

py::object tensor_stats(py::handle obj) {
  if (!THPVariable_Check(obj.ptr())) throw py::type_error("ovf: stats() takes a torch.Tensor");
  TensorView view;
  if (!readable_view(THPVariable_Unpack(obj.ptr()), &view)) return py::none();
  return stats_dict(ovf::compute_stats_cpu(view));
}

bool detect_overflow(py::handle var, const std::string& ctx) {
  std::string text;
  bool found = false;
  if (!THPVariable_Check(var.ptr())) {
    throw py::type_error("ovf.detect_overflow: var must be a torch.Tensor, got " +
                         py::str(var.get_type().attr("__name__")).cast<std::string>());
  }
  const at::Tensor& t = THPVariable_Unpack(var.ptr());
  TensorView view;
  if (readable_view(t, &view)) {
    found = ovf::Monitor::instance().checkpoint(ovf::compute_stats_cpu(view), view.dtype, device_of(t), ctx, &text);
  }
  write_stdout(text);
  return found;
}

}  // namespace

PYBIND11_MODULE(_ovf, m) {
  m.doc() = "ovf runtime: module hooks feeding the frame ring (see ovf/__init__.py for the API)";
  m.attr("__version__") = OVF_VERSION_STRING;
  m.attr("LAYOUT_VERSION") = OVF_LAYOUT_VERSION;

  m.def("forward_hook", &forward_hook, "Forward hook (module, args, output) for a watched module.");
  m.def("forward_hook_with_kwargs", &forward_hook_with_kwargs,
        "Forward hook (module, args, kwargs, output), torch >= 2.0 with_kwargs=True.");
  m.def("forward_pre_hook", &forward_pre_hook, "Forward pre-hook: names new modules (auto mode), tracks the module stack.");
  m.def("watch_module", &watch_module, py::arg("module"), py::arg("name"), py::arg("is_root"));
  m.def("after_optimizer_step", [](py::handle optimizer) { guarded([&] { after_optimizer_step(optimizer); }); },
        "Checks an optimizer's parameters after its step; records the non-finite ones.");
  m.def("is_watched", [](py::handle module) { return modules().count(module.ptr()) > 0; });
  m.def("clear_modules", &clear_modules);
  m.def("set_callbacks", [](py::object kwargs_stack, py::object discover, py::object nonfinite_error) {
    g_kwargs_stack = new py::list(kwargs_stack);  // lives for the process, like the hooks
    g_discover = discover.is_none() ? nullptr : new py::object(discover);
    g_nonfinite_error = new py::object(nonfinite_error);
  });
  m.def("start_session",
        [](uint32_t max_frames, std::vector<int64_t> trace, int64_t abort_after, uint32_t on_event) {
          ovf::SessionOptions o;
          o.max_frames_to_save = max_frames;
          o.trace_batch_nums = std::move(trace);
          o.abort_after_batch_num = abort_after;
          o.on_event = static_cast<ovf_on_event>(on_event);
          const std::string error = ovf::Monitor::instance().start_session(o);
          if (!error.empty()) throw py::value_error("ovf: " + error);
        });
  m.def("stop_session", [] { ovf::Monitor::instance().stop_session(); });
  m.def("detect_overflow", &detect_overflow, py::arg("var"), py::arg("ctx"));
  m.def("stats", &tensor_stats, "One-pass stats of a CPU tensor as a dict (None if unreadable).");
  m.def("configure_ring", [](uint32_t capacity) {
    ovf::RingConfig config;
    config.record_capacity = capacity;
    const std::string error = ovf::ring_configure(config);
    if (!error.empty()) throw py::value_error("ovf: " + error);
  });
  m.def("state_address", [] { return reinterpret_cast<uintptr_t>(&ovf_state); });
  m.def("report", [](uint32_t frames) {
    uint32_t found = 0;
    const uint64_t end = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
    return ovf::format_frames(ovf::last_frames(0, end, frames, &found));
  });
  m.def("format_8_2e", &ovf::format_8_2e);
  m.def("batch", [] { return ovf_state.batch; });
  m.def("enable_core_dumps", [] {
    rlimit limit;
    if (getrlimit(RLIMIT_CORE, &limit) != 0) return false;
    limit.rlim_cur = limit.rlim_max;
    return setrlimit(RLIMIT_CORE, &limit) == 0 && limit.rlim_cur != 0;
  });
  m.def("set_control", [](py::kwargs fields) {
    ovf_control& c = ovf_state.control;
    for (auto item : fields) {
      const std::string key = py::str(item.first);
      py::handle v = item.second;
      if (key == "enabled") c.enabled = v.cast<bool>();
      else if (key == "stop_mask") c.stop_mask = v.cast<uint32_t>();
      else if (key == "on_event") c.on_event = v.cast<uint32_t>();
      else if (key == "above") c.above = v.cast<double>();
      else if (key == "below") c.below = v.cast<double>();
      else if (key == "after_batch") c.after_batch = v.cast<int64_t>();
      else if (key == "observe") c.observe = v.cast<uint32_t>();
      else if (key == "headroom_dtype") c.headroom_dtype = v.cast<uint32_t>();
      else if (key == "module_glob") {
        const std::string glob = v.cast<std::string>();
        if (glob.size() >= OVF_GLOB_SIZE) throw py::value_error("ovf: module glob longer than 255 bytes");
        std::memset(c.module_glob, 0, OVF_GLOB_SIZE);
        std::memcpy(c.module_glob, glob.data(), glob.size());
      } else {
        throw py::type_error("ovf: unknown control field '" + key + "'");
      }
    }
    c.generation++;
  });
  m.def("control", [] {
    const ovf_control& c = ovf_state.control;
    py::dict d;
    d["enabled"] = static_cast<bool>(c.enabled);
    d["stop_mask"] = c.stop_mask;
    d["on_event"] = ovf::on_event_name(c.on_event);
    d["above"] = c.above;
    d["below"] = c.below;
    d["after_batch"] = c.after_batch;
    d["abort_after_batch"] = c.abort_after_batch;
    d["module_glob"] = std::string(c.module_glob, strnlen(c.module_glob, OVF_GLOB_SIZE));
    d["observe"] = c.observe;
    d["headroom_dtype"] = c.headroom_dtype;
    return d;
  });

  // Constants mirrored from ovf/ring.h for the Python side.
  m.attr("ON_EVENT") = py::dict(py::arg("raise") = int(OVF_ON_EVENT_RAISE), py::arg("warn") = int(OVF_ON_EVENT_WARN),
                                py::arg("abort") = int(OVF_ON_EVENT_ABORT), py::arg("wait") = int(OVF_ON_EVENT_WAIT),
                                py::arg("continue") = int(OVF_ON_EVENT_CONTINUE));
  m.attr("STOP_NAN") = int(OVF_STOP_NAN);
  m.attr("STOP_INF") = int(OVF_STOP_INF);
  m.attr("STOP_ABOVE") = int(OVF_STOP_ABOVE);
  m.attr("STOP_BELOW") = int(OVF_STOP_BELOW);
  m.attr("STOP_TRACED") = int(OVF_STOP_TRACED);
  m.attr("STOP_ABORT_AFTER") = int(OVF_STOP_ABORT_AFTER);
  m.attr("STOP_PRODUCER_ONLY") = int(OVF_STOP_PRODUCER_ONLY);
  m.attr("STOP_BACKWARD") = int(OVF_STOP_BACKWARD);
  m.attr("OBSERVE_OPS") = int(OVF_OBSERVE_OPS);
  m.attr("OBSERVE_BACKWARD") = int(OVF_OBSERVE_BACKWARD);
  m.attr("OBSERVE_OPTIMIZER_STATE") = int(OVF_OBSERVE_OPTIMIZER_STATE);
  m.def("sync_op_observer", &ovf::sync_op_observer, "Arms or disarms the op observer per control.observe.");
}
