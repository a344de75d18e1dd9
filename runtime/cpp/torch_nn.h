// The parts of the C++ API that need torch::nn and torch::optim (torch_nn.cpp),
// so that the rest compiles against ATen alone.
#ifndef OVF_CPP_TORCH_NN_H
#define OVF_CPP_TORCH_NN_H

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "ovf/ovf.h"  // declares torch::nn::Module and torch::optim::Optimizer

namespace ovf {
namespace detail {

struct NamedModule {
  std::string path;  // "" for the model itself, "encoder.fc" below it
  const torch::nn::Module* module;
  std::vector<std::pair<std::string, at::Tensor>>
      parameters;  // its own: named_parameters(recurse=false)
};

// Every module of the tree, in named_modules() order (a module reached twice
// is listed under each path: the first one wins where it matters).
std::vector<NamedModule> named_modules(const torch::nn::Module& model);

// The module's class name as torch::nn reports it ("StretchImpl").
std::string module_class(const torch::nn::Module& module);

// The optimizer's parameters checked after its step (optimizer_check.h);
// returns the stop events.
uint32_t check_optimizer(const torch::optim::Optimizer& optimizer);

}  // namespace detail
}  // namespace ovf

#endif  // OVF_CPP_TORCH_NN_H
