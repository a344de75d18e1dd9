// ovf for LibTorch C++ programs: the first inf/NaN of a training run, found at
// the ATen op that produced it, named by module, with the same ring, report and
// debugger commands as the Python API.
//
//   #include <ovf/ovf.h>
//
//   Net model;                       // a torch::nn::Module tree with named submodules
//   ovf::Watch watch(*model);        // names modules and parameters, arms the op observer
//   for (...) {
//     ... forward, backward, optimizer step ...
//     watch.next_batch();            // the end of a batch; throws ovf::NonFiniteError (on_nan
//     raise)
//   }
//
// Link ovf::ovf_torch (CMake: find_package(ovf) then target_link_libraries(app ovf::ovf_torch)).
// Under `gdb --args ./app` + `ovf break-on-nan` (OVF_ENABLE=1 in the environment)
// the Watch takes its options from the OVF_* variables and the debugger stops
// right after the op, inside the C++ forward, locals alive. docs/cpp-api.md.
#ifndef OVF_OVF_H
#define OVF_OVF_H

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch {
namespace nn {
class Module;
}  // namespace nn
namespace optim {
class Optimizer;
}  // namespace optim
}  // namespace torch

namespace ovf {

// What the first non-finite value does when no debugger handles it.
enum class OnNan {
  kRaise,  // print the report; the next next_batch() / detect_overflow() throws NonFiniteError
  kWarn,   // print the report once, keep training
  kAbort,  // print the report, then abort(): the kernel writes a core with the ring in it
  kWait,   // print the report and the gdb -p / lldb -p commands, wait until a debugger releases it
  kContinue,  // do nothing: a debugger's breakpoint on ovf_stop_event handles events
};

struct Options {
  OnNan on_nan = OnNan::kRaise;
  uint32_t max_frames_to_save = 21;  // also how many op records the report lists
  bool ops = true;  // check every ATen op's outputs (C++ modules have no forward hooks)
  bool backward =
      false;  // also the backward pass's ops, named by the forward op they differentiate
  bool carriers = false;    // events also at ops that only pass on a NaN/Inf they were given
  std::string module;       // fnmatch glob on module paths: events only there ("" = everywhere)
  int64_t after_batch = 0;  // events only in batches >= this (0-based)
  // With OVF_ENABLE=1 in the environment (what `ovf break-on-nan` sets for the
  // next `run`), OVF_ON_NAN, OVF_STOP, OVF_OBSERVE, OVF_MODULE, OVF_AFTER_BATCH
  // and OVF_MAX_FRAMES override the fields above.
  bool from_environment = true;
};

// The reference's ValueError: thrown by Watch::next_batch() and detect_overflow()
// after a non-finite value was found with on_nan raise. what() is the
// reference's message; the report was printed to stdout when the op ran.
class NonFiniteError : public std::runtime_error {
 public:
  NonFiniteError(const std::string& message, uint64_t batch)
      : std::runtime_error(message), batch_(batch) {}
  uint64_t batch() const noexcept { return batch_; }  // the batch of the first event

 private:
  uint64_t batch_;
};

// A bad option, in Options or in an OVF_* variable; what() says what is accepted.
class OptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Watches one model, for the lifetime of the object. One Watch at a time per
// process (a second one throws std::logic_error).
class Watch {
 public:
  // Names every submodule and parameter as Python's named_modules() and
  // named_parameters() would (the model itself is ""), starts a session
  // (batch 0) and arms the op observer. An op that takes a watched parameter
  // runs in that parameter's module; ops that take none (torch::log(x) in a
  // custom forward) are named by a ModuleScope in that forward.
  explicit Watch(torch::nn::Module& model, Options options = Options());
  ~Watch();  // disarms the op observer and ends the session
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Marks the end of a batch (C++ has no root forward hook): batch numbers then
  // match the Python API's. Throws NonFiniteError when on_nan is raise and a
  // non-finite value was found since the last throw.
  void next_batch();

  // After optimizer.step(): checks every parameter; one that came out
  // non-finite is recorded by path (a STEP frame) and a debugger armed with
  // `ovf break-on-nan` stops here, as after a Python optimizer's step.
  void after_step(const torch::optim::Optimizer& optimizer);

  uint64_t batch() const;          // the current batch number (0-based)
  const Options& options() const;  // as in effect, after the environment

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The reference's detect_overflow(var, ctx): records the tensor's stats in the
// ring, prints "<ctx> has nans" / "<ctx> has infs" to stdout, returns whether
// it has either. Under a debugger armed with `ovf break-on-nan` a non-finite
// tensor stops here. Throws NonFiniteError when a Watch's raise is pending.
bool detect_overflow(const at::Tensor& var, const std::string& ctx);

// Names the ops run while it lives (one thread) after a module, for forwards
// whose ops take none of the module's parameters:
//
//   torch::Tensor forward(torch::Tensor x) {
//     ovf::ModuleScope scope(this);  // ops below run in this module's path
//     return torch::log(x);
//   }
//
// A module the Watch did not name (or no Watch) leaves the ops' module as it was.
class ModuleScope {
 public:
  explicit ModuleScope(const torch::nn::Module* module);
  explicit ModuleScope(const std::string& name);  // any name, e.g. "loss"
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  bool pushed_ = false;
};

// The text of the report for the latest non-finite event, as on_nan prints it:
// the reference's "Detected inf/nan during batch_number=N" block, the last op
// records before it, and where the first non-finite value was produced.
std::string report();

}  // namespace ovf

#endif  // OVF_OVF_H
