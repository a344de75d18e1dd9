#include "recent_stats.h"

#include <c10/util/intrusive_ptr.h>

#include <array>
#include <atomic>
#include <cstdint>

namespace ovf {
namespace {

constexpr size_t kEntries = 32;  // a forward's recent values; older ones are rarely read again
constexpr int kMaxDims = 8;      // tensors of more dimensions are not noted

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl>;

// A reference to no tensor: matches none, holds no memory.
WeakImpl no_tensor() { return WeakImpl(c10::intrusive_ptr<c10::TensorImpl>()); }

struct Entry {
  WeakImpl impl = no_tensor();
  int64_t version = 0;
  const void* data = nullptr;
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  int ndim = 0;
  std::array<int64_t, kMaxDims> sizes{}, strides{};
  bool negated = false;
  bool casts = false;
  Stats stats;
};

struct Table {
  std::array<Entry, kEntries> entries;
  size_t next = 0;
  uint64_t hits = 0;
};

thread_local Table t_table;
std::atomic<bool> g_on{true};

bool versioned(const at::Tensor& t) { return !t.is_inference(); }

bool same_view(const Entry& e, const TensorView& view) {
  if (e.data != view.data || e.dtype != view.dtype || e.ndim != view.ndim ||
      e.negated != view.negated)
    return false;
  for (int d = 0; d < view.ndim; ++d)
    if (e.sizes[d] != view.sizes[d] || e.strides[d] != view.strides[d]) return false;
  return true;
}

}  // namespace

const Stats* recent_stats(const at::Tensor& t, const TensorView& view, bool casts) {
  if (!versioned(t) || !g_on.load(std::memory_order_relaxed)) return nullptr;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (const Entry& e : t_table.entries) {
    if (e.impl._unsafe_get_target() != impl || e.impl.expired()) continue;
    if (e.version == t._version() && e.casts == casts && same_view(e, view)) {
      ++t_table.hits;
      return &e.stats;
    }
  }
  return nullptr;
}

void remember_stats(const at::Tensor& t, const TensorView& view, bool casts, const Stats& stats) {
  if (!versioned(t) || view.ndim > kMaxDims || !stats.has_stats) return;
  Entry& e = t_table.entries[t_table.next];
  t_table.next = (t_table.next + 1) % kEntries;
  e.impl = WeakImpl(t.getIntrusivePtr());
  e.version = t._version();
  e.data = view.data;
  e.dtype = view.dtype;
  e.ndim = view.ndim;
  for (int d = 0; d < view.ndim; ++d) {
    e.sizes[d] = view.sizes[d];
    e.strides[d] = view.strides[d];
  }
  e.negated = view.negated;
  e.casts = casts;
  e.stats = stats;
}

void forget_recent_stats() {
  for (Entry& e : t_table.entries) e.impl = no_tensor();
}

uint64_t recent_stats_hits() { return t_table.hits; }

void use_recent_stats(bool on) { g_on.store(on, std::memory_order_relaxed); }

}  // namespace ovf
