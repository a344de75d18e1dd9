// The parameters of the watched modules: each one's path ("enc.fc.weight"),
// which names it after an optimizer step, and its module, which names the ops
// that take it in programs without module forward hooks (the C++ API: an op
// on fc.weight, or on a view of it, runs in "fc"; so do the ops nested in it).
#ifndef OVF_PARAMETERS_H
#define OVF_PARAMETERS_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace ovf {

// Registers `param` as parameter `path_id` of the module whose interned path is
// `module_id`. The registry holds a reference to the tensor, so its address is
// not reused under that name while registered. A parameter shared by two
// modules keeps the first registration.
void register_parameter(const at::Tensor& param, uint32_t module_id, uint32_t path_id);

// Forgets every registered parameter (and drops the references).
void clear_parameters();

// Whether ops take their module from the parameters they use (the C++ API turns
// this on; Python's module hooks name every op's module themselves).
void set_op_context_from_parameters(bool on);
bool op_context_from_parameters();

// The module of a registered parameter, or of a tensor sharing a registered
// parameter's storage (a view: weight.t()); OVF_NO_ID otherwise, and always
// while set_op_context_from_parameters is off. Thread-safe, one or two lookups.
uint32_t parameter_module(const at::Tensor& tensor);

// The path of a registered parameter (the tensor itself), or OVF_NO_ID.
uint32_t parameter_path(const at::Tensor& tensor);
// Its path, or "param_groups[...]params[index]" for parameter number `index`
// (param_groups order) of an optimizer that holds an unregistered one.
std::string parameter_name(const at::Tensor& param, size_t index);

// The path of the registered parameter whose .grad is `tensor` (or shares its
// storage), or OVF_NO_ID. Walks every parameter: for an event, not for every op.
uint32_t gradient_owner(const at::Tensor& tensor);

// Whether module path `inner` is `outer` or lies inside it ("enc.fc" in "enc";
// every path in the root ""; anything in OVF_NO_ID).
bool module_within(uint32_t inner, uint32_t outer);

}  // namespace ovf

#endif  // OVF_PARAMETERS_H
