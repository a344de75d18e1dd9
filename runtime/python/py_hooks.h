// The Python driver: module forward hooks and the optimizer check turn Python
// objects into core calls, and the core's responses into Python's terms
// (printing to sys.stdout, NonFiniteError). What the bindings call.
#ifndef OVF_PY_HOOKS_H
#define OVF_PY_HOOKS_H

#include <pybind11/pybind11.h>

#include <functional>
#include <string>

#include "response.h"

namespace ovf {

// The Python objects the driver calls back: auto mode's discover(module) (None:
// explicit mode), the exception class NonFiniteError (raised asynchronously
// after an op by class: its bare instance carries the reference's message) and
// EarlyWarningError (--early). Also makes the driver act on op events.
void set_python_callbacks(pybind11::object discover, pybind11::object nonfinite_error,
                          pybind11::object early_warning_error);

// Module hooks (global in auto mode, per module in explicit mode), registered
// with_kwargs=True: keyword inputs are recorded too.
void forward_hook(pybind11::handle module, pybind11::handle args, pybind11::handle kwargs,
                  pybind11::handle output);
// The same seeing what the reference's hooks see (its report, byte for byte):
// positional inputs, tensors in tuples, and anything else "not a tensor".
void forward_hook_positional(pybind11::handle module, pybind11::handle args,
                             pybind11::handle output);
void forward_pre_hook(pybind11::handle module, pybind11::handle args);
// The forward hook of a module inside a torch.compile'd graph (its FRAME is
// flagged OVF_FLAG_COMPILED).
void compiled_forward_hook(pybind11::handle module, pybind11::handle args, pybind11::handle output);

// Names `module` `name` (the root starts a batch's forward) and its parameters.
// An --if expression in Python mode: `condition(seq, events)` -> bool decides
// each NaN/Inf/backward event (None: every event stands).
void set_event_condition(pybind11::object condition);

void watch_module(pybind11::handle module, const std::string& name, bool is_root, bool step_root);

// The module (its name as ovf names it, or None) and program line ("model.py:25 in
// forward", or "") that the ops run next on this thread are named by: a compiled
// graph's node run again eagerly (op_observer.h's set_op_site); `gradient_of` (None: a
// forward node) the forward op a backward graph's node differentiates ("" unknown).
// None, "" and None go back to the usual.
void set_op_site(pybind11::handle module_name, const std::string& location,
                 pybind11::handle gradient_of);

// The name ovf gave a watched module, or None.
pybind11::object watched_name(pybind11::handle module);
bool is_watched(pybind11::handle module);

// Wait mode gives up waiting for a debugger after this many seconds (0: never).
void set_wait_timeout(double seconds);
void clear_modules();

// Checks an optimizer's parameters (and state, when asked) after its step.
void after_optimizer_step(pybind11::handle optimizer);
// Raises the NonFiniteError an op on another thread decided (a backward op's
// NaN): called where backward() returns and before an optimizer writes.
void deliver_pending_raise();

// Runs `decide` in the session (not at all when none runs or a debugger
// disabled it) and does what its response says: print, raise, abort, wait.
// An internal failure disables ovf with one line, as in the hooks.
void act_in_session(const std::function<Response()>& decide);

// optimizer.step() as _early.py measured it: |dw|/|w| over the step's parameters,
// and the parameter that changed most (number `index` in param_groups order).
void update_ratio(const std::string& optimizer_class, pybind11::handle parameter, size_t index,
                  double ratio, double parameter_ratio);

// GradScaler.update() (_scaler.py): `optimizers` those it skipped since the last.
void scaler_update(const std::string& scaler_class, pybind11::handle optimizers, double before,
                   double after, bool skipped);

// Waits for the frames whose device statistics are on their way and acts on
// their events without raising (the session's end, atexit). Returns the exit
// status the answer asks of a program that is ending: 1 when a raise was due
// (no Python code is left to raise it in), 130 when Ctrl-C ended a wait, else 0.
int flush_device_frames();

// Waits for every queued op group (op_groups.h) and judges it, without the
// interpreter's lock: an autograd thread may be judging ops and need it (--if).
void flush_op_groups_unlocked();

// ovf.detect_overflow(var, ctx).
bool detect_overflow(pybind11::handle var, const std::string& ctx);

}  // namespace ovf

#endif  // OVF_PY_HOOKS_H
