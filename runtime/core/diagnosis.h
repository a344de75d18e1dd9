// Why an op made a NaN or Inf from finite inputs, in one line: what the stop
// summary, `ovf py-locals` and the Python report end with.
//   aten::log of 16 zeros (-inf)
//   aten::div: the divisor has 3 zeros: 0/0 in 3 elements (nan)
//   aten::exp overflow: input abs max 9.10e+01 > 88.7 (float32)
//   aten::to to float16: input abs max 7.10e+04 > 65504
//   aten::softmax of rows that are -inf throughout (masked whole): 16 nan
//   aten::nll_loss2d_forward: the targets' total weight is 0 (...): 0/0 in the mean (nan)
#ifndef OVF_DIAGNOSIS_H
#define OVF_DIAGNOSIS_H

#include <string>
#include <string_view>
#include <vector>

#include "stats.h"

namespace ovf {

struct Operand {
  Stats stats;
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
};

// `op`: "aten::log"; `output` the non-finite output; `inputs` the op's tensor
// inputs in order (as they were before it ran). "" when nothing can be said.
std::string diagnose(const std::string& op, const Operand& output,
                     const std::vector<Operand>& inputs);

// Whether `why` says no more than "made N nan from finite inputs": a composite
// op's (aten::cross_entropy_loss) is then better told by the op inside it
// that made the value (op_observer.cpp).
bool is_generic(std::string_view why);

}  // namespace ovf

#endif  // OVF_DIAGNOSIS_H
