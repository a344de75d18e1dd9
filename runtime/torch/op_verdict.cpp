// A producing op run again for its verdict (op_verdict.h). The re-runs are
// unseen: ovf's op observer skips them (rerunning()), they build no autograd
// graph and pass no Python dispatch mode (a user's TorchDispatchMode, an oracle's).
#include "op_verdict.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "report.h"
#include "ring_writer.h"

namespace ovf {
namespace op_detail {
namespace {

std::atomic<int> g_verdicts_left{kVerdicts};
thread_local bool t_rerunning = false;
constexpr int kDeviceRuns = 2;

struct Counts {
  uint64_t nan = 0;
  uint64_t inf = 0;
  bool operator!=(const Counts& o) const { return nan != o.nan || inf != o.inf; }
};

std::string text(const Counts& c) {
  return std::to_string(c.nan) + " nan and " + std::to_string(c.inf) + " inf";
}

Counts counts_of(const at::Tensor& t) {
  return {static_cast<uint64_t>(at::isnan(t).sum().item<int64_t>()),
          static_cast<uint64_t>(at::isinf(t).sum().item<int64_t>())};
}

// The op's `index`-th output tensor, numbered as end_op numbers them.
at::Tensor output_at(const std::vector<c10::IValue>& results, size_t index) {
  at::Tensor found;
  size_t i = 0;
  for (const c10::IValue& value : results) {
    for_each_tensor(value, [&](const at::Tensor& t) {
      if (i++ == index) found = t;
    });
  }
  if (!found.defined()) throw std::runtime_error("the re-run returned fewer outputs");
  return found;
}

at::Tensor run_unseen(const c10::OperatorHandle& op, std::vector<c10::IValue> stack, size_t index) {
  at::NoGradGuard no_graph;
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  op.callBoxed(&stack);
  return output_at(stack, index);
}

bool is_kind(const c10::TypePtr& type, c10::TypeKind kind) {
  if (type->kind() == kind) return true;
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == kind;
}

at::Tensor widened(const at::Tensor& t) {
  if (!t.defined()) return t;
  const at::Tensor value = t.detach();
  return value.is_floating_point() ? value.to(at::kCPU, at::kDouble) : value.to(at::kCPU);
}

// An argument as the float64 re-run takes it: tensors on the CPU, floating ones
// (and floating dtypes asked for: Tensor.half()'s) in float64.
c10::IValue in_float64(const c10::IValue& value, const c10::Argument& argument) {
  if (value.isTensor()) return widened(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList().vec()) out.push_back(widened(t));
    return out;
  }
  if (value.isInt() && is_kind(argument.real_type(), c10::TypeKind::ScalarTypeType) &&
      c10::isFloatingType(static_cast<c10::ScalarType>(value.toInt())))
    return static_cast<int64_t>(at::kDouble);
  if (value.isDevice()) return c10::Device(c10::kCPU);
  return value;
}

std::string writes_its_input(const std::string& name) {
  return "no verdict: " + name + " writes its input (not re-run)";
}

std::string first_line(const char* what) {
  std::string line(what);
  line = line.substr(0, line.find('\n'));
  return line.size() > 160 ? line.substr(0, 157) + "..." : line;
}

uint32_t verdict(const EndedOp& e, const OutputLine& line, const Stats& made,
                 const std::string& name) {
  const auto op = c10::Dispatcher::singleton().findOp({name, e.op.overload});
  if (!op) return OVF_NO_ID;
  // The facts are learnt per name: this overload may write (add's out=).
  if (op->schema().is_mutable()) return intern(writes_its_input(name));
  const Counts original{made.nan_count, made.pos_inf_count + made.neg_inf_count};
  for (int run = 0; run < kDeviceRuns; ++run) {
    const at::Tensor again = run_unseen(*op, e.op.arguments, line.output_index);
    const Counts counts = counts_of(again);
    if (counts != original) {
      return intern("does not reproduce on the same inputs: a re-run on " + again.device().str() +
                    " made " + text(counts) + " where the run made " + text(original) +
                    ": suspect the hardware or a racy kernel");
    }
  }
  std::vector<c10::IValue> wide;
  const std::vector<c10::Argument>& schema = op->schema().arguments();
  for (size_t i = 0; i < e.op.arguments.size(); ++i)
    wide.push_back(i < schema.size() ? in_float64(e.op.arguments[i], schema[i])
                                     : e.op.arguments[i]);
  const at::Tensor exact = run_unseen(*op, std::move(wide), line.output_index);
  const Counts counts = counts_of(exact);
  if (counts.nan + counts.inf > 0)
    return intern("non-finite in float64 too (" + text(counts) +
                  "): the math itself on these inputs, not this op's precision");
  const double abs_max = exact.numel() > 0 ? exact.abs().max().item<double>() : 0.0;
  return intern("finite in float64 (abs max " + format_2e(abs_max) +
                "): " + dtype_name(line.dtype) + "'s range or precision here");
}

}  // namespace

bool rerunning() { return t_rerunning; }

uint32_t op_verdict(const EndedOp& e, const OutputLine& line, const Stats& made) {
  const OpFacts& facts = *e.op.facts;
  const std::string name(interned(facts.name_id));
  if (!e.op.rerun) {
    if (name.rfind("aten::", 0) != 0)
      return intern("no verdict: " + name +
                    " is not an ATen op (not re-run: it may talk to "
                    "other ranks or have effects of its own)");
    if (facts.random) return intern("no verdict: " + name + " draws random numbers (not re-run)");
    if (facts.in_place || facts.writes_unmarked ||
        std::find(facts.written.begin(), facts.written.end(), true) != facts.written.end())
      return intern(writes_its_input(name));
    return OVF_NO_ID;
  }
  if (e.inputs_rewritten) return OVF_NO_ID;  // the why says so
  if (g_verdicts_left.fetch_sub(1, std::memory_order_relaxed) <= 0) return OVF_NO_ID;
  // Every op of the verdict (the re-runs, the counting) is ovf's own: unobserved,
  // or judging them would judge again the group that holds this op.
  struct Rerunning {
    Rerunning() { t_rerunning = true; }
    ~Rerunning() { t_rerunning = false; }
  } rerunning;
  try {
    return verdict(e, line, made, name);
  } catch (const std::exception& error) {
    return intern("no verdict: re-running " + name + " failed: " + first_line(error.what()));
  }
}

}  // namespace op_detail
}  // namespace ovf
