// The tensors this thread last saw finite as an op's output, at the version
// they had then. An in-place op's written input is judged from its value at
// the op's start (op_observer.cpp); one that is still such a tensor needs no
// scan for that: an optimizer's step writes each parameter and each state
// several times in a row, and the step after reads them again unchanged.
//
// "Unchanged" is the tensor's version counter, its data pointer, and the
// writes observed ops made into its storage: the last catch writes through
// another tensor sharing the storage with a counter of its own
// (`p.data.fill_(...)`, BatchNorm's running stats). A collective writes without
// any of these, and ops run unobserved while the op observer is off, so both
// forget everything. Writes no op makes (through numpy, raw pointers) are not
// seen: the op after such a write is judged as if the tensor had not changed.
#ifndef OVF_KNOWN_FINITE_H
#define OVF_KNOWN_FINITE_H

#include <ATen/core/Tensor.h>

namespace ovf {

// An op's output whose statistics just showed no NaN or Inf.
void note_finite(const at::Tensor& tensor);

// Whether `tensor` is such an output, unchanged since.
bool known_finite(const at::Tensor& tensor);

// An observed op is about to write into `tensor`'s storage.
void note_storage_written(const at::Tensor& tensor);

// A collective may write into any tensor now, or the op observer was off.
void forget_known_finite();

// How many written inputs known_finite spared a scan on this thread (a test hook).
uint64_t known_finite_hits();

}  // namespace ovf

#endif  // OVF_KNOWN_FINITE_H
