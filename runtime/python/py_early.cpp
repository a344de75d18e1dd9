// An optimizer step's update-to-weight ratio, measured by _early.py, as the
// core's early warning sees it (monitor.h: Monitor::update_ratio).
#include <torch/csrc/autograd/python_variable.h>

#include "monitor.h"
#include "parameters.h"
#include "py_hooks.h"
#include "ring_writer.h"

namespace py = pybind11;

namespace ovf {

void update_ratio(const std::string& optimizer_class, py::handle parameter, size_t index,
                  double ratio, double parameter_ratio) {
  act_in_session([&] {
    Monitor::UpdateRatio u;
    u.class_id = intern(optimizer_class);
    if (THPVariable_Check(parameter.ptr()))
      u.parameter_id = intern(parameter_name(THPVariable_Unpack(parameter.ptr()), index));
    u.ratio = ratio;
    u.parameter_ratio = parameter_ratio;
    return Monitor::instance().update_ratio(u, /*can_raise=*/true);
  });
}

}  // namespace ovf
