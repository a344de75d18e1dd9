// The statistics of the inputs and outputs the module hooks read lately, within
// one forward of the root module: a module's input is mostly a tensor an earlier
// hook read already (a Sequential's layer k reads layer k-1's output; a residual
// block reads its input again), and reading it again would double what module
// mode reads. A tensor is the one read when it is the same TensorImpl (a weak
// reference: alive, so not another tensor at the same address), at the same
// version, over the same memory, sizes and strides. What moves no version counter
// (a write through .data or a numpy view between two hooks of one forward) would
// go unseen, so the entries end with the forward, and parameters never use them
// (py_hooks.cpp: read at every forward). CPU tensors only: a device tensor's
// statistics arrive later. One table per thread; a fixed number of entries.
#ifndef OVF_RECENT_STATS_H
#define OVF_RECENT_STATS_H

#include <ATen/core/Tensor.h>

#include "stats.h"

namespace ovf {

// The statistics read of `t` (seen through `view`) in this forward with the
// cast counts `casts` asks for, or nullptr.
const Stats* recent_stats(const at::Tensor& t, const TensorView& view, bool casts);
// Notes `stats` as what `t` holds now.
void remember_stats(const at::Tensor& t, const TensorView& view, bool casts, const Stats& stats);
// A root forward begins: every entry is forgotten.
void forget_recent_stats();
// Test and benchmark hooks: statistics taken from the table on this thread so far;
// the table switched off (every tensor read, as before it existed) or on.
uint64_t recent_stats_hits();
void use_recent_stats(bool on);

}  // namespace ovf

#endif  // OVF_RECENT_STATS_H
