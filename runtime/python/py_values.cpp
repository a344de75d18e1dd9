#include "py_values.h"

#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include "ring_writer.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace ovf {
namespace {

// Structures nested deeper than this are reported as "not a tensor".
constexpr int kMaxDepth = 8;

bool is_dataclass_instance(PyObject* obj) {
  return PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(obj)), "__dataclass_fields__");
}

// Adds what both views record the same way: a truncated frame's marker, a tensor, None.
// False: `obj` is something else, for the caller to walk or call "not a tensor".
bool add_leaf(FrameBuilder& frame, ovf_record_kind kind, PyObject* obj, const std::string& label) {
  if (frame.full()) {
    frame.add_value(kind, 0);  // flags the frame truncated
  } else if (THPVariable_Check(obj)) {
    add_tensor_line(frame, kind, intern(label), THPVariable_Unpack(obj));
  } else if (obj == Py_None) {
    frame.add_value(OVF_KIND_NONE, intern(label));
  } else {
    return false;
  }
  return true;
}

}  // namespace

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

void add_python_value(FrameBuilder& frame, ovf_record_kind kind, PyObject* obj, std::string& label,
                      int depth) {
  if (add_leaf(frame, kind, obj, label)) return;
  const size_t base = label.size();
  if (depth < kMaxDepth && (PyTuple_Check(obj) || PyList_Check(obj))) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject** items = PySequence_Fast_ITEMS(obj);
    for (Py_ssize_t i = 0; i < n; ++i) {
      label += "[" + std::to_string(i) + "]";
      add_python_value(frame, kind, items[i], label, depth + 1);
      label.resize(base);
    }
    return;
  }
  if (depth < kMaxDepth && PyDict_Check(obj)) {
    // Copy the items first: a value's __repr__ could mutate the dict.
    py::list items = py::reinterpret_steal<py::list>(PyDict_Items(obj));
    for (py::handle item : items) {
      label += key_label(PyTuple_GET_ITEM(item.ptr(), 0));
      add_python_value(frame, kind, PyTuple_GET_ITEM(item.ptr(), 1), label, depth + 1);
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
      add_python_value(frame, kind, value, label, depth + 1);
      label.resize(base);
    }
    return;
  }
  frame.add_value(OVF_KIND_NOT_TENSOR, intern(label));
}

void add_value_as_reference(FrameBuilder& frame, ovf_record_kind kind, PyObject* obj,
                            std::string& label, int tuple_levels) {
  if (add_leaf(frame, kind, obj, label)) return;
  if (tuple_levels > 0 && PyTuple_Check(obj)) {
    const size_t base = label.size();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); ++i) {
      label += "[" + std::to_string(i) + "]";
      add_value_as_reference(frame, kind, PyTuple_GET_ITEM(obj, i), label, tuple_levels - 1);
      label.resize(base);
    }
  } else {
    frame.add_value(OVF_KIND_NOT_TENSOR, intern(label));
  }
}

namespace {

// Calls fn for each tensor of the dict attribute `attribute` of `module`.
void for_each_tensor_in(PyObject* module, const char* attribute,
                        const std::function<void(const char*, const at::Tensor&)>& fn) {
  PyObject* params = PyObject_GetAttrString(module, attribute);
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

}  // namespace

void for_each_own_parameter(PyObject* module,
                            const std::function<void(const char*, const at::Tensor&)>& fn) {
  for_each_tensor_in(module, "_parameters", fn);
}

void for_each_own_buffer(PyObject* module,
                         const std::function<void(const char*, const at::Tensor&)>& fn) {
  for_each_tensor_in(module, "_buffers", fn);
}

}  // namespace ovf
