// GradScaler.update() as ovf records it (_scaler.py patches the class): at a
// skip, the first parameter whose gradient holds the NaN/Inf; then the SCALER
// record and what the process does when the scaler gave up (monitor.h).
#include <torch/csrc/autograd/python_variable.h>

#include "monitor.h"
#include "parameters.h"
#include "py_hooks.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace ovf {
namespace {

// In param_groups order, one read of each gradient until the first non-finite
// one (a device's read waits): at a skip only.
uint32_t first_nonfinite_gradient(py::handle optimizers) {
  for (py::handle optimizer : optimizers) {
    size_t index = 0;
    for (py::handle group : optimizer.attr("param_groups")) {
      for (py::handle p : group["params"]) {
        const size_t i = index++;
        if (!THPVariable_Check(p.ptr())) continue;
        const at::Tensor& param = THPVariable_Unpack(p.ptr());
        const at::Tensor& grad = param.grad();
        if (!grad.defined()) continue;
        if (tensor_nonfinite(grad)) return intern(parameter_name(param, i));
      }
    }
  }
  return OVF_NO_ID;
}

}  // namespace

void scaler_update(const std::string& scaler_class, py::handle optimizers, double before,
                   double after, bool skipped) {
  act_in_session([&] {
    // The scaled backward's ops are judged first: one of them is the skip's cause.
    flush_op_groups_unlocked();
    Monitor::ScalerUpdate u;
    u.class_id = intern(scaler_class);
    u.parameter_id = skipped ? first_nonfinite_gradient(optimizers) : OVF_NO_ID;
    u.scale_before = before;
    u.scale_after = after;
    u.skipped = skipped;
    return Monitor::instance().scaler_update(u, /*can_raise=*/true);
  });
}

}  // namespace ovf
