// What a RecordFunction record is, by its name: an op of the program, or a
// record of torch.compile's machinery, of ovf's own ops, of a collective or of
// its transport's work (op_observer.cpp treats each its own way).
#ifndef OVF_RECORD_KINDS_H
#define OVF_RECORD_KINDS_H

#include <ATen/record_function.h>

#include <cstring>

namespace ovf {
namespace op_detail {

// A region torch.compile made: Inductor's kernels write their inputs without
// ops (dynamo's record of the frame, AOTAutograd's autograd function).
inline bool is_compiled_region(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), "Torch-Compiled Region", 21) == 0 ||
         std::strncmp(fn.name(), "CompiledFunction", 16) == 0;
}

// Records of torch.compile's machinery, not ops: a compiled region, Dynamo's look-up of
// its compiled code.
inline bool is_compiler_scope(const at::RecordFunction& fn) {
  return is_compiled_region(fn) || std::strncmp(fn.name(), "TorchDynamo Cache Lookup", 24) == 0;
}

// ovf's own custom ops (_compile.py's module hooks and node checks inside compiled
// graphs): not ops of the program. The ops a node check runs again are then the
// outermost, judged as each ends.
inline bool is_ovf_op(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), "ovf::", 5) == 0;
}

inline bool is_collective(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), "c10d::", 6) == 0;
}

// Gloo runs a collective's work on a thread of its own, inside a user-scope
// record named after it ("gloo:all_reduce"): the ops in it (the division of a
// reduce-scatter's average, the copy into its output) are the collective's,
// like those it runs on the calling thread. Other user scopes are not ops.
inline bool is_transport_work(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), "gloo:", 5) == 0;
}

}  // namespace op_detail
}  // namespace ovf

#endif  // OVF_RECORD_KINDS_H
