// The tensors this thread last saw finite as an in-place op's output, as they
// were then. An in-place op's written input is judged from its value at the
// op's start (op_observer.cpp); one that is still such a tensor needs no scan
// for that: an optimizer's step writes each parameter and each state several
// times in a row, and the step after reads them again unchanged.
//
// "Unchanged" is the same tensor object with the same version counter and data
// address, and no observed write into its storage since -- the last catches
// writes through another tensor on the storage with a counter of its own
// (`p.data.fill_(...)`) and writes no version moves (BatchNorm's running
// stats). Every op's writes count, judged or not (a backward op while only the
// forward is judged). Everything is forgotten when writes may have gone unseen:
// a collective (it writes later, on its own threads), a compiled region
// (Inductor's kernels write their inputs without ops), the op observer
// registered again (nothing was observed meanwhile), or a write into memory the
// default CPU allocator did not give (numpy's or DLPack's view of a tensor, shared
// or pinned memory: another tensor, process or a device copy may hold it too).
// Only tensors from that allocator are noted. Writes no op makes (through raw
// pointers into such memory) are not seen.
#ifndef OVF_KNOWN_FINITE_H
#define OVF_KNOWN_FINITE_H

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ovf {

// What a tensor is before its statistics are read: noted after them only if
// nothing moved meanwhile (a write on another thread, a collective in the op).
struct KnownFiniteMark {
  bool eligible = false;  // has a version and memory from the default CPU allocator
  uint32_t version = 0;
  const void* data = nullptr;
  uint64_t storage_writes = 0;
  uint64_t epoch = 0;
};
KnownFiniteMark known_finite_mark(const at::Tensor& tensor);

// forget_known_finite's count so far: an op notes its outputs only if it is the
// same at its end as at its start.
uint64_t known_finite_epoch();

// An in-place op's output whose statistics, read after `mark` was taken,
// showed no NaN or Inf.
void note_finite(const at::Tensor& tensor, const KnownFiniteMark& mark);

// Whether `tensor` is such an output, unchanged since.
bool known_finite(const at::Tensor& tensor);

// An op is about to write into `tensor`'s storage.
void note_storage_written(const at::Tensor& tensor);

// Writes may have gone unseen: nothing seen so far is taken as known.
void forget_known_finite();

// How many written inputs known_finite spared a scan on this thread (a test hook).
uint64_t known_finite_hits();

}  // namespace ovf

#endif  // OVF_KNOWN_FINITE_H
