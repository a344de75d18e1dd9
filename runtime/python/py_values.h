// Python values as frame lines: tensors, None, non-tensors, and the elements
// of tuples, lists, dicts and dataclasses under "[i]", "[\"key\"]", ".field".
#ifndef OVF_PY_VALUES_H
#define OVF_PY_VALUES_H

#include <ATen/core/Tensor.h>
#include <Python.h>

#include <functional>
#include <string>

#include "frame_builder.h"

namespace ovf {

// Adds `obj` under `label` (which it extends and restores for elements).
// Structures nested deeper than a few levels are one "not a tensor" line.
void add_python_value(FrameBuilder& frame, ovf_record_kind kind, PyObject* obj, std::string& label,
                      int depth);

// Adds `obj` as the reference's create_frame sees it: a tensor, None, the elements
// of a tuple `tuple_levels` levels deep (an output: 2; an input element: 0), and
// anything else (a list, a dict such as transformers' ModelOutput) "not a tensor".
void add_value_as_reference(FrameBuilder& frame, ovf_record_kind kind, PyObject* obj,
                            std::string& label, int tuple_levels);

// "[\"key\"]" for a str key, "[repr]" for others ("[?]" when repr fails).
std::string key_label(PyObject* key);

// Calls fn(name, tensor) for each tensor in a module's own _parameters, in
// registration order; None entries (bias=False) are skipped, as
// named_parameters() skips them.
void for_each_own_parameter(PyObject* module,
                            const std::function<void(const char*, const at::Tensor&)>& fn);

// The same over its own _buffers.
void for_each_own_buffer(PyObject* module,
                         const std::function<void(const char*, const at::Tensor&)>& fn);

}  // namespace ovf

#endif  // OVF_PY_VALUES_H
