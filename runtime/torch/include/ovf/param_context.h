// Module context for programs without module forward hooks (the C++ API): an
// op that takes a watched parameter (or a view of one) as an input runs in that
// parameter's module, and so do the ops nested inside it (aten::linear on
// fc.weight, and the aten::t / aten::addmm it calls, run in "fc"). The op
// observer asks this only when no enclosing module is known, or when the
// parameter's module lies inside the known one. The Python driver registers
// nothing here: its module hooks name every op's module.
#ifndef OVF_PARAM_CONTEXT_H
#define OVF_PARAM_CONTEXT_H

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ovf/ring.h"

namespace ovf {

// Registers `param` as owned by the module whose interned path is
// `module_name_id`. The registry holds a reference to the tensor and its
// storage, so their addresses are not reused under that name while it is
// registered. A parameter shared by two modules keeps the first.
void watch_parameter(const at::Tensor& param, uint32_t module_name_id);

// Forgets every registered parameter (and drops the references).
void clear_watched_parameters();

// The module of a registered parameter, or of a tensor sharing a registered
// parameter's storage (a view: weight.t()); OVF_NO_ID otherwise. Thread-safe,
// one or two hash lookups.
uint32_t parameter_module(const at::Tensor& tensor);

// Whether module path `inner` is `outer` or lies inside it ("enc.fc" in "enc";
// every path in the root ""; anything in OVF_NO_ID).
bool module_within(uint32_t inner, uint32_t outer);

// Called by the op observer after an op's output fired stop events (after
// ovf_stop_event), on the thread that ran the op, inside the op's
// RecordFunction callback: it must not throw. Drivers without module frames
// (the C++ API) act on events here; nullptr (the default) does nothing.
using OpEventHandler = void (*)(const ovf_record& record, uint32_t events);
void set_op_event_handler(OpEventHandler handler);

}  // namespace ovf

#endif  // OVF_PARAM_CONTEXT_H
