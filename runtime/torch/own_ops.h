// The guard every ATen op ovf runs for itself sits under.
#ifndef OVF_OWN_OPS_H
#define OVF_OWN_OPS_H

#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace ovf {

// ovf's own ops must be invisible: to the op observer (it would observe them),
// to autograd and autocast, and to Python dispatch modes (a TorchDispatchMode
// in the user's program would see where(finite, |x|, inf) make an inf).
struct OwnOpsGuard {
  c10::NoGradGuard no_grad;
  at::DisableRecordFunctionGuard no_observer;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
  c10::impl::ExcludeDispatchKeyGuard no_python{
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
};

}  // namespace ovf

#endif  // OVF_OWN_OPS_H
