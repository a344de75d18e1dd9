// The one part of the C++ API that needs torch::nn (module_names.cpp): the
// paths of a module tree, so that the rest compiles against ATen alone.
#ifndef OVF_CPP_MODULE_NAMES_H
#define OVF_CPP_MODULE_NAMES_H

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace ovf {
namespace detail {

struct NamedModule {
  std::string path;  // "" for the model itself, "encoder.fc" below it
  const torch::nn::Module* module;
  std::vector<at::Tensor> parameters;  // the module's own (named_parameters(recurse=false))
};

// Every module of the tree, in named_modules() order (a module reached twice
// is listed under each path: the first one wins where it matters).
std::vector<NamedModule> named_modules(const torch::nn::Module& model);

}  // namespace detail
}  // namespace ovf

#endif  // OVF_CPP_MODULE_NAMES_H
