// Module paths of a torch::nn::Module tree. named_modules(prefix, include_self
// = true) needs the model to live in a shared_ptr; a model on the stack is
// fine here: the model itself is added by hand.
#include "module_names.h"

#include <torch/nn/module.h>

namespace ovf {
namespace detail {

namespace {

std::vector<at::Tensor> own_parameters(const torch::nn::Module& module) {
  std::vector<at::Tensor> out;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) out.push_back(item.value());
  return out;
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

}  // namespace detail
}  // namespace ovf
