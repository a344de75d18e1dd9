#include "diagnosis.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "report.h"

namespace ovf {
namespace {

bool is(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (op == std::string("aten::") + n) return true;
  }
  return false;
}

std::string plural(uint64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// "3 nan, 1 +inf" of the output.
std::string made(const Stats& s) {
  std::string out;
  auto add = [&](uint64_t n, const char* what) {
    if (n) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(s.nan_count, "nan");
  add(s.pos_inf_count, "+inf");
  add(s.neg_inf_count, "-inf");
  return out;
}

double largest_input(const std::vector<Operand>& inputs) {
  double m = 0;
  for (const Operand& in : inputs) {
    if (in.stats.has_stats) m = std::max(m, in.stats.abs_max);
  }
  return m;
}

}  // namespace

namespace {
constexpr const char* kFromFiniteInputs = " from finite inputs";
}  // namespace

std::string diagnose(const std::string& op, const Operand& out,
                     const std::vector<Operand>& inputs) {
  const Stats& o = out.stats;
  if (!o.has_stats || !o.nonfinite()) return "";
  const Stats* first = inputs.empty() ? nullptr : &inputs[0].stats;
  if (is(op, {"log", "log2", "log10", "log_", "log2_", "log10_"})) {
    std::string why = op + " of";
    if (o.nan_count) why += " " + plural(o.nan_count, "negative value") + " (nan)";
    if (o.neg_inf_count)
      why += std::string(o.nan_count ? " and" : "") + " " + plural(o.neg_inf_count, "zero") +
             " (-inf)";
    return why;
  }
  if (is(op, {"sqrt", "sqrt_", "rsqrt", "rsqrt_"})) {
    std::string why = op + " of";
    if (o.nan_count) why += " " + plural(o.nan_count, "negative value") + " (nan)";
    if (o.pos_inf_count)
      why +=
          std::string(o.nan_count ? " and" : "") + " " + plural(o.pos_inf_count, "zero") + " (inf)";
    return why;
  }
  // Where the divisor is: div(x, y), addcdiv(self, t1, t2) = self + value * t1 / t2.
  const size_t divisor = is(op, {"addcdiv", "addcdiv_"}) ? 2 : 1;
  if (is(op, {"div", "div_", "true_divide", "floor_divide", "remainder", "fmod", "addcdiv",
              "addcdiv_"}) &&
      inputs.size() > divisor && inputs[divisor].stats.has_stats) {
    const uint64_t zeros = inputs[divisor].stats.zero_count;
    if (zeros) {
      std::string why = op + ": the divisor has " + plural(zeros, "zero");
      if (o.nan_count) why += ": 0/0 in " + plural(o.nan_count, "element") + " (nan)";
      if (o.pos_inf_count + o.neg_inf_count) {
        why += std::string(o.nan_count ? "," : ":") + " x/0 in " +
               plural(o.pos_inf_count + o.neg_inf_count, "element") + " (inf)";
      }
      return why;
    }
  }
  if (is(op, {"reciprocal", "reciprocal_"}) && first != nullptr && first->zero_count) {
    return op + " of " + plural(first->zero_count, "zero") + " (inf)";
  }
  // nll_loss's mean divides by the targets' total weight; from finite inputs a
  // NaN comes only from 0/0: every target was ignore_index (or weighted 0).
  if (is(op, {"nll_loss_forward", "nll_loss2d_forward"}) && o.nan_count) {
    return op + ": the targets' total weight is 0 (every target is ignore_index or weighs 0):" +
           " 0/0 in the mean (nan)";
  }
  const double top = dtype_max(out.dtype);
  if (is(op, {"exp", "exp_", "exp2", "expm1", "cosh", "sinh"}) && first != nullptr &&
      first->has_stats && top > 0) {
    const double limit = std::log(top) / (is(op, {"exp2"}) ? std::log(2.0) : 1.0);
    return op + " overflow: input abs max " + format_2e(first->abs_max) + " > " +
           format_g(std::round(limit * 10) / 10) + " (" + dtype_name(out.dtype) + ")";
  }
  if (is(op, {"to", "_to_copy", "copy_", "type_as", "half", "bfloat16"}) && top > 0 &&
      largest_input(inputs) > top) {
    return op + " to " + dtype_name(out.dtype) + ": input abs max " +
           format_2e(largest_input(inputs)) + " > " + format_g(top);
  }
  if (o.pos_inf_count + o.neg_inf_count && !o.nan_count && top > 0) {
    return op + " overflow: results exceed " + dtype_name(out.dtype) + "'s max " + format_2e(top) +
           " (largest input abs max " + format_2e(largest_input(inputs)) + ")";
  }
  // A NaN from deliberate infinities (op_observer.cpp: masks never make NaN).
  const bool softmax = is(op, {"softmax", "_softmax", "log_softmax", "_log_softmax"});
  if (softmax && first != nullptr && first->neg_inf_count && o.nan_count) {
    return op + " of rows that are -inf throughout (masked whole): " + made(o);
  }
  for (const Operand& in : inputs) {
    if (in.stats.pos_inf_count + in.stats.neg_inf_count) {
      return op + " made " + made(o) + " from the infinities of a mask (inf - inf, 0 * inf)";
    }
  }
  return op + " made " + made(o) + kFromFiniteInputs;
}

bool is_generic(std::string_view why) {
  const std::string_view tail = kFromFiniteInputs;
  return why.size() >= tail.size() && why.substr(why.size() - tail.size()) == tail;
}

}  // namespace ovf
