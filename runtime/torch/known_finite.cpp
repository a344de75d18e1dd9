#include "known_finite.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "torch_tensor.h"

namespace ovf {
namespace {

using TensorImplPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using WeakTensorImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Seen {
  // Weak: the address is not reused by a new tensor while this is held, and
  // the tensor's memory is not kept (only its TensorImpl object, until swept).
  WeakTensorImpl impl{TensorImplPtr()};
  uint32_t version = 0;
  const void* data = nullptr;
  uint64_t storage_writes = 0;  // its storage bucket's count when it was seen
  uint64_t epoch = 0;           // forget_known_finite's count when it was seen
};

// Fixed tables, allocated once: small blocks allocated per op among the big
// ones an optimizer step frees and allocates again fragment the heap (a hash map
// of nodes here doubled a vit_b_16 step's page faults). A tensor takes the slot
// of its thread's table that its address hashes to (a collision forgets the
// other). A storage's writes are counted, for every thread, in a bucket it may
// share (a write to the other storage then forgets it too: a scan more, never a
// wrong answer).
constexpr size_t kSlots = 1024;
constexpr size_t kStorageBuckets = 4096;
std::array<std::atomic<uint64_t>, kStorageBuckets> g_storage_writes{};
// forget_known_finite's count: entries of an earlier epoch are forgotten, on
// every thread at once.
std::atomic<uint64_t> g_epoch{1};
// Each note sweeps a few slots of dead tensors, so that none keeps its
// TensorImpl allocated for long.
constexpr size_t kSweptPerNote = 16;

struct Table {
  std::array<Seen, kSlots> seen;
  size_t sweep_at = 0;
  uint64_t hits = 0;
};
thread_local Table t_table;

// Fibonacci hashing: the top bits of the address times 2^64 / phi. (Heap
// addresses share their low bits, and std::hash of a pointer is the pointer.)
template <size_t N>
size_t bucket(const void* address) {
  static_assert((N & (N - 1)) == 0 && N > 1, "a power of two");
  constexpr int kBits = __builtin_ctzll(N);
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(address) * 0x9E3779B97F4A7C15ull) >>
                             (64 - kBits));
}

std::atomic<uint64_t>& writes_of(const c10::StorageImpl* storage) {
  return g_storage_writes[bucket<kStorageBuckets>(storage)];
}

// Where the tensor's elements start in memory; null when its storage holds
// none (freed, or resized to 0 by FSDP2 between uses). Never throws.
const void* address_of(const at::Tensor& t) {
  const auto* data = static_cast<const char*>(t.storage().data());
  return data == nullptr ? nullptr : data + t.storage_offset() * t.itemsize();
}

// Memory from the default CPU allocator: no other tensor, process or device copy
// writes it behind a StorageImpl of its own.
bool own_memory(const c10::StorageImpl* storage) {
  return storage->data_ptr().get_deleter() == c10::GetCPUAllocator()->raw_deleter();
}

void sweep_some() {
  Table& table = t_table;
  for (size_t i = 0; i < kSweptPerNote; ++i) {
    Seen& s = table.seen[table.sweep_at];
    if (s.epoch != 0 && s.impl.expired()) s = Seen{};
    table.sweep_at = (table.sweep_at + 1) % kSlots;
  }
}

}  // namespace

KnownFiniteMark known_finite_mark(const at::Tensor& t) {
  KnownFiniteMark mark;
  const c10::optional<uint32_t> version = version_of(t);
  if (!version || !t.has_storage() || !own_memory(t.storage().unsafeGetStorageImpl())) return mark;
  mark.eligible = true;
  mark.version = *version;
  mark.data = address_of(t);
  mark.storage_writes =
      writes_of(t.storage().unsafeGetStorageImpl()).load(std::memory_order_acquire);
  mark.epoch = known_finite_epoch();
  return mark;
}

uint64_t known_finite_epoch() { return g_epoch.load(std::memory_order_acquire); }

void note_finite(const at::Tensor& t, const KnownFiniteMark& mark) {
  if (!mark.eligible || mark.data == nullptr) return;
  sweep_some();
  Seen& s = t_table.seen[bucket<kSlots>(t.unsafeGetTensorImpl())];
  s.impl = WeakTensorImpl(t.getIntrusivePtr());
  s.version = mark.version;
  s.data = mark.data;
  s.storage_writes = mark.storage_writes;
  s.epoch = mark.epoch;
}

bool known_finite(const at::Tensor& t) {
  Table& table = t_table;
  Seen& s = table.seen[bucket<kSlots>(t.unsafeGetTensorImpl())];
  if (s.epoch != known_finite_epoch() || s.impl._unsafe_get_target() != t.unsafeGetTensorImpl())
    return false;
  // The same address and alive: the same tensor object (the weak reference kept
  // the address from a new one).
  const KnownFiniteMark now = known_finite_mark(t);
  const bool same = !s.impl.expired() && now.eligible && now.version == s.version &&
                    now.data == s.data && now.storage_writes == s.storage_writes;
  if (!same) {
    s = Seen{};
    return false;
  }
  ++table.hits;
  return true;
}

void note_storage_written(const at::Tensor& t) {
  if (!t.has_storage()) return;
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (!own_memory(storage)) {
    forget_known_finite();  // it may be a view of memory a noted tensor holds
    return;
  }
  writes_of(storage).fetch_add(1, std::memory_order_acq_rel);
}

void forget_known_finite() { g_epoch.fetch_add(1, std::memory_order_acq_rel); }

uint64_t known_finite_hits() { return t_table.hits; }

}  // namespace ovf
