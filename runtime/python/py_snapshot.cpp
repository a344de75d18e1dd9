#include "py_snapshot.h"

#include <Python.h>
#include <frameobject.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include <unistd.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "op_observer.h"
#include "ring_writer.h"
#include "snapshot.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace ovf {
namespace {

// Code that is not the program's: torch's and ovf's own directories, Python's standard
// library (its decorators' wrappers: warnings.deprecated, functools, contextlib) but
// the packages installed under it, and typing_extensions (torch 2.14 marks
// dist.reduce_scatter_tensor deprecated with it). Set once.
std::string g_torch_dir, g_ovf_dir, g_stdlib_dir, g_typing_extensions_file, g_generated_dir;

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.compare(0, prefix.size(), prefix) == 0;
}

// The program's own code: not torch, not ovf, not the standard library, not frozen importlib.
bool is_user_file(const std::string& file) {
  const bool stdlib = starts_with(file, g_stdlib_dir) &&
                      !starts_with(file, g_stdlib_dir + "site-packages/") &&
                      !starts_with(file, g_stdlib_dir + "dist-packages/");
  return !stdlib && !starts_with(file, g_torch_dir) && !starts_with(file, g_ovf_dir) &&
         !starts_with(file, g_generated_dir) && !starts_with(file, "<frozen") &&
         file != g_typing_extensions_file;
}

std::string utf8(PyObject* text) {
  if (text == nullptr || !PyUnicode_Check(text)) return "?";
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data == nullptr) {
    PyErr_Clear();  // a lone surrogate: the bytes as the file system has them
    PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape");
    if (bytes == nullptr) {
      PyErr_Clear();
      return "?";
    }
    std::string out(PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
    Py_DECREF(bytes);
    return out;
  }
  return std::string(data, size);
}

// The repr of an exact bool, int, float or short str, computed here without
// calling the object (a subclass could run code: shown by its type only); "" else.
std::string plain_value_text(PyObject* value) {
  constexpr Py_ssize_t kLongestString = 64;
  if (PyBool_Check(value)) return value == Py_True ? "True" : "False";
  if (PyLong_CheckExact(value)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return "";  // a big int: its digits are not worth a decimal conversion here
    }
    return std::to_string(v);
  }
  if (PyFloat_CheckExact(value)) {
    char* repr =
        PyOS_double_to_string(PyFloat_AS_DOUBLE(value), 'r', 0, Py_DTSF_ADD_DOT_0, nullptr);
    if (repr == nullptr) {
      PyErr_Clear();
      return "";
    }
    std::string out(repr);
    PyMem_Free(repr);
    return out;
  }
  if (PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) <= kLongestString) {
    return "'" + utf8(value) + "'";
  }
  return "";
}

void add_local(ovf_snapshot* s, PyObject* name, PyObject* value) {
  ovf_snapshot_local& l = s->locals[s->local_count++];
  std::memset(&l, 0, sizeof l);
  l.name_id = intern(utf8(name));
  l.type_id = intern(Py_TYPE(value)->tp_name);
  l.device_index = -1;
  const std::string text = plain_value_text(value);
  if (!text.empty()) {
    l.flags = OVF_SNAP_VALUE;
    l.value_id = intern(text);
    return;
  }
  if (!THPVariable_Check(value)) return;
  const at::Tensor& t = THPVariable_Unpack(value);
  l.flags = OVF_SNAP_TENSOR;
  if (!t.defined()) return;
  l.dtype = to_ovf_dtype(t.scalar_type());
  const DeviceId device = device_id_of(t);
  l.device_type = device.type;
  l.device_index = device.index;
  const int64_t ndim = t.dim();
  l.ndim = static_cast<uint8_t>(std::min<int64_t>(ndim, 255));
  if (ndim > static_cast<int64_t>(OVF_SNAPSHOT_DIMS)) l.flags |= OVF_SNAP_SHAPE_TRUNCATED;
  for (int64_t d = 0; d < std::min<int64_t>(ndim, OVF_SNAPSHOT_DIMS); ++d) l.shape[d] = t.size(d);
  l.numel = static_cast<uint64_t>(t.numel());
  const ovf_record line = tensor_line(OVF_KIND_INPUT, 0, t);
  if (!(line.flags & OVF_FLAG_HAS_STATS)) return;
  l.flags |= OVF_SNAP_HAS_STATS;
  l.nan_count = line.nan_count;
  l.pos_inf_count = line.pos_inf_count;
  l.neg_inf_count = line.neg_inf_count;
  l.zero_count = line.zero_count;
  l.abs_min = line.abs_min;
  l.abs_max = line.abs_max;
}

void add_locals(ovf_snapshot* s, PyFrameObject* frame) {
  PyObject* locals =
      PyFrame_GetLocals(frame);  // a dict (3.11, 3.12) or a read-through proxy (3.13)
  if (locals == nullptr) {
    PyErr_Clear();
    return;
  }
  PyObject* items = PyMapping_Items(locals);
  Py_DECREF(locals);
  if (items == nullptr) {
    PyErr_Clear();
    return;
  }
  const Py_ssize_t n = PyList_GET_SIZE(items);
  // All of them counted, the first OVF_SNAPSHOT_LOCALS kept: a reader can say what it lacks.
  s->frame_locals = static_cast<uint32_t>(std::min<Py_ssize_t>(n, UINT32_MAX));
  for (Py_ssize_t i = 0; i < n && s->local_count < OVF_SNAPSHOT_LOCALS; ++i) {
    PyObject* item = PyList_GET_ITEM(items, i);
    if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2) {
      add_local(s, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1));
    }
  }
  Py_DECREF(items);
}

// A relative code path joined to the working directory ("<stdin>", "<string>"
// and absolute paths as they are).
std::string absolute_path(const std::string& file) {
  if (file.empty() || file[0] == '/' || file[0] == '<') return file;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) return file;
  return std::string(cwd) + "/" + (file.rfind("./", 0) == 0 ? file.substr(2) : file);
}

// snapshot_frame's frame, shown as the program's own (nullptr: the innermost of
// the program's own code is). Set and read with the GIL held.
PyFrameObject* g_focus = nullptr;

void write_snapshot(ovf_snapshot* s) {
  if (!Py_IsInitialized()) return;
  // A thread with no Python (an autograd worker) has no stack to show.
  if (PyGILState_GetThisThreadState() == nullptr) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  try {
    PyFrameObject* frame = g_focus != nullptr ? g_focus : PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    bool user_seen = false;
    while (frame != nullptr && s->frame_count < OVF_SNAPSHOT_FRAMES) {
      PyCodeObject* code = PyFrame_GetCode(frame);
      const std::string file = utf8(code->co_filename);
      ovf_snapshot_frame& f = s->frames[s->frame_count++];
      // Absolute: a core is read from elsewhere (`python3 train.py` names it train.py).
      f.file_id = intern(absolute_path(file));
      f.function_id = intern(utf8(code->co_name));
      f.line = PyFrame_GetLineNumber(frame);
      f.flags = 0;
      Py_DECREF(code);
      if (!user_seen && (g_focus != nullptr || is_user_file(file))) {
        user_seen = true;
        f.flags = OVF_SNAP_USER;
        add_locals(s, frame);
      }
      PyFrameObject* back = PyFrame_GetBack(frame);
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
  } catch (const std::exception&) {
    // a tensor that could not be read: the snapshot keeps what it has
  }
  PyErr_Clear();
  PyGILState_Release(gil);
}

std::string package_dir(const char* module) {
  try {
    const std::string file = py::module_::import(module).attr("__file__").cast<std::string>();
    return file.substr(0, file.rfind('/') + 1);
  } catch (const py::error_already_set&) {
    return "";
  }
}

}  // namespace

void snapshot_frame(PyObject* frame, uint64_t event_seq) {
  g_focus = PyFrame_Check(frame) ? reinterpret_cast<PyFrameObject*>(frame) : nullptr;
  take_snapshot(event_seq);
  g_focus = nullptr;
}

// "real_models.py:177 in normalised_distance": the program's own innermost
// frame on this thread, interned; cached by code object and line (code objects
// are kept alive by the cache, so an address is never another's).
uint32_t python_location() {
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return OVF_NO_ID;
  PyGILState_STATE gil = PyGILState_Ensure();
  uint32_t id = OVF_NO_ID;
  struct Code {
    std::string where;  // "file.py:" prefix and function, or "" for torch's and ovf's own code
    std::string function;
  };
  static std::unordered_map<PyCodeObject*, Code> codes;
  static std::unordered_map<uint64_t, uint32_t> ids;  // (code index << 32 | line) -> id
  static std::unordered_map<PyCodeObject*, uint32_t> code_index;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    auto it = codes.find(code);
    if (it == codes.end()) {
      const std::string file = utf8(code->co_filename);
      Code entry;
      if (is_user_file(file)) {
        entry.where = file.substr(file.rfind('/') + 1);
        entry.function = utf8(code->co_name);
      }
      Py_INCREF(code);
      it = codes.emplace(code, entry).first;
      code_index.emplace(code, static_cast<uint32_t>(code_index.size()));
    }
    if (!it->second.where.empty()) {
      const int line = PyFrame_GetLineNumber(frame);
      const uint64_t key =
          static_cast<uint64_t>(code_index[code]) << 32 | static_cast<uint32_t>(line);
      auto known = ids.find(key);
      if (known == ids.end()) {
        known = ids.emplace(key, intern(it->second.where + ":" + std::to_string(line) + " in " +
                                        it->second.function))
                    .first;
      }
      id = known->second;
      Py_DECREF(code);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  PyGILState_Release(gil);
  return id;
}

void set_generated_code_dir(const std::string& dir) {
  g_generated_dir = dir.empty() || dir.back() == '/' ? dir : dir + "/";
}

void install_python_snapshot() {
  g_torch_dir = package_dir("torch");
  g_ovf_dir = package_dir("ovf");
  g_stdlib_dir = package_dir("functools");  // a module of the standard library's own directory
  const std::string typing_extensions = package_dir("typing_extensions");
  if (!typing_extensions.empty())
    g_typing_extensions_file = typing_extensions + "typing_extensions.py";
  set_snapshot_writer(&write_snapshot);
  set_location_provider(&python_location);
}

}  // namespace ovf
