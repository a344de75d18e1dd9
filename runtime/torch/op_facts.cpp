#include "op_facts.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "ring_writer.h"

namespace ovf {
namespace {

bool ends_with(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

bool one_of(const char* name, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (std::strcmp(name, n) == 0) return true;
  }
  return false;
}

// Ops whose outputs hold no values yet (fresh or resized memory): checking
// them would find NaNs that nobody computed.
bool writes_no_values(const char* name) {
  return one_of(name, {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                       "aten::new_empty_strided", "aten::resize_", "aten::resize_as_", "aten::set_",
                       "aten::as_strided_", "aten::detach_", "aten::t_", "aten::transpose_",
                       "aten::squeeze_", "aten::unsqueeze_"});
}

bool writes_zeros(const char* name) {
  return one_of(name, {"aten::zero_", "aten::zeros", "aten::zeros_like", "aten::new_zeros"});
}

// In-place ops that overwrite their `self` whatever it held.
bool overwrites_self(const char* name) {
  return one_of(name, {"aten::copy_", "aten::fill_", "aten::zero_", "aten::normal_",
                       "aten::uniform_", "aten::bernoulli_", "aten::random_", "aten::exponential_",
                       "aten::geometric_", "aten::log_normal_", "aten::cauchy_"});
}

// Factories of values that depend on numbers only (their tensor arguments, if
// any, give a shape or a dtype): what masks are built from.
bool makes_constant(const char* name, const std::string& overload) {
  if (std::strcmp(name, "aten::fill_") == 0) return overload == "Scalar";  // not fill_(t)
  return writes_zeros(name) ||
         one_of(name,
                {"aten::ones", "aten::ones_like", "aten::new_ones", "aten::full", "aten::full_like",
                 "aten::new_full", "aten::arange", "aten::eye", "aten::linspace", "aten::logspace",
                 "aten::scalar_tensor", "aten::tril_indices", "aten::triu_indices"});
}

bool draws_random_numbers(const char* name) {
  for (const char* part : {"rand", "normal", "bernoulli", "dropout", "multinomial", "poisson",
                           "uniform", "exponential", "cauchy", "geometric"}) {
    if (std::strstr(name, part) != nullptr) return true;
  }
  return false;
}

OpFacts learn(const at::RecordFunction& fn) {
  OpFacts facts;
  const char* name = fn.name();
  facts.name_id = intern(name);
  facts.writes_no_values = writes_no_values(name);
  facts.writes_zeros = writes_zeros(name);
  const auto op = fn.operator_name();
  facts.makes_constant = makes_constant(name, op ? op->overload_name : std::string());
  facts.random = draws_random_numbers(name);
  facts.in_place = ends_with(name, "_") || (op && op->overload_name == "out");
  if (op) {
    const auto handle = c10::Dispatcher::singleton().findOp(*op);
    facts.composite =
        handle && handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU);
  }
  // The schema is a copy: fetched once per operator, never per call.
  const auto schema = fn.operator_schema();
  if (schema) {
    const auto& arguments = schema->arguments();
    facts.written.resize(arguments.size());
    facts.old_values_read.resize(arguments.size(), true);
    for (size_t i = 0; i < arguments.size(); ++i) {
      const auto* alias = arguments[i].alias_info();
      facts.written[i] = alias != nullptr && alias->isWrite();
      const bool overwritten =
          arguments[i].name() == "out" || (i == 0 && facts.written[i] && overwrites_self(name));
      if (facts.written[i] && overwritten) facts.old_values_read[i] = false;
      const std::string& argument = arguments[i].name();
      if (!facts.written[i] && (argument == "running_mean" || argument == "running_var"))
        facts.writes_unmarked = true;
      if (argument == "training" && arguments[i].type()->kind() == c10::TypeKind::BoolType)
        facts.training = static_cast<int>(i);
    }
    const bool writes_nothing_else =
        std::strncmp(name, "aten::", 6) == 0 && !facts.in_place && !facts.random &&
        !facts.writes_no_values &&
        std::none_of(facts.written.begin(), facts.written.end(), [](bool w) { return w; });
    facts.rerun = writes_nothing_else && !facts.writes_unmarked;
    facts.rerun_unless_training =
        writes_nothing_else && facts.writes_unmarked && facts.training >= 0;
  }
  return facts;
}

}  // namespace

bool reruns(const OpFacts& facts, const at::RecordFunction& fn) {
  if (facts.rerun) return true;
  if (!facts.rerun_unless_training) return false;
  const auto inputs = fn.inputs();
  const size_t training = static_cast<size_t>(facts.training);
  return training < inputs.size() && inputs[training].isBool() && !inputs[training].toBool();
}

const OpFacts& op_facts(const at::RecordFunction& fn) {
  static thread_local std::unordered_map<const char*, OpFacts> known;
  const char* name = fn.name();
  auto it = known.find(name);
  if (it == known.end()) it = known.emplace(name, learn(fn)).first;
  return it->second;
}

}  // namespace ovf
