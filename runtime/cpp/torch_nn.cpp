// Module paths of a torch::nn::Module tree. named_modules(prefix, include_self
// = true) needs the model to live in a shared_ptr; a model on the stack is
// fine here: the model itself is added by hand.
#include "torch_nn.h"

#include <cxxabi.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>

#include "optimizer_check.h"

namespace ovf {
namespace detail {

namespace {

std::vector<std::pair<std::string, at::Tensor>> own_parameters(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : module.named_parameters(/*recurse=*/false))
    out.emplace_back(item.key(), item.value());
  return out;
}

// "torch::optim::Adam": the dynamic type's demangled name.
std::string class_name(const torch::optim::Optimizer& optimizer) {
  const char* mangled = typeid(optimizer).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? demangled.get() : mangled;
}

}  // namespace

std::vector<NamedModule> named_modules(const torch::nn::Module& model) {
  std::vector<NamedModule> out;
  out.push_back({"", &model, own_parameters(model)});
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    out.push_back({item.key(), item.value().get(), own_parameters(*item.value())});
  }
  return out;
}

std::string module_class(const torch::nn::Module& module) { return module.name(); }

uint32_t check_optimizer(const torch::optim::Optimizer& optimizer) {
  StepCheck check(class_name(optimizer));
  size_t index = 0;
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) check.parameter(p, index++);
  }
  return check.finish();
}

}  // namespace detail
}  // namespace ovf
