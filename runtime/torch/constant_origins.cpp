#include "constant_origins.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "ovf/ring.h"

namespace ovf {
namespace {

// Masks live a batch or a few: a few thousand storages is plenty, and the map
// sheds freed ones when it grows past that.
constexpr size_t kMaxOrigins = 4096;

struct Noted {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  Origin origin = Origin::kNone;
  uint32_t collective_id = OVF_NO_ID;  // kReceived: the collective that wrote it
};

struct Found {
  Origin origin = Origin::kNone;
  uint32_t collective_id = OVF_NO_ID;
};

struct Origins {
  std::mutex mutex;  // ops run on autograd threads too
  std::unordered_map<const void*, Noted> by_storage;
  std::atomic<size_t> count{0};  // by_storage.size(), read without the lock
};

Origins& origins() {
  static auto* o = new Origins();  // never destroyed: ops may run during exit
  return *o;
}

// Notes `origin` for `storage` (kNone forgets it); returns the collective that had
// filled that storage, or OVF_NO_ID.
uint32_t note(const c10::Storage& storage, Origin origin, uint32_t collective_id) {
  Origins& o = origins();
  if (origin == Origin::kNone && o.count.load(std::memory_order_relaxed) == 0) return OVF_NO_ID;
  std::lock_guard<std::mutex> lock(o.mutex);
  const void* key = storage.unsafeGetStorageImpl();
  uint32_t filled_by = OVF_NO_ID;
  const auto it = o.by_storage.find(key);
  if (it != o.by_storage.end()) {
    const auto alive = it->second.storage.lock();  // not a freed one at the same address
    if (alive && alive.get() == key) filled_by = it->second.collective_id;
  }
  if (origin == Origin::kNone) {
    if (it != o.by_storage.end()) o.by_storage.erase(it);
  } else {
    if (o.by_storage.size() >= kMaxOrigins) {
      for (auto it = o.by_storage.begin(); it != o.by_storage.end();) {
        it = it->second.storage.expired() ? o.by_storage.erase(it) : std::next(it);
      }
      if (o.by_storage.size() >= kMaxOrigins) o.by_storage.clear();
    }
    o.by_storage.insert_or_assign(storage.unsafeGetStorageImpl(),
                                  Noted{storage.getWeakStorageImpl(), origin, collective_id});
  }
  o.count.store(o.by_storage.size(), std::memory_order_relaxed);
  return filled_by;
}

Found noted_for(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return {};
  Origins& o = origins();
  if (o.count.load(std::memory_order_relaxed) == 0) return {};
  std::lock_guard<std::mutex> lock(o.mutex);
  auto it = o.by_storage.find(t.storage().unsafeGetStorageImpl());
  if (it == o.by_storage.end()) return {};
  auto alive = it->second.storage.lock();
  if (!alive || alive.get() != t.storage().unsafeGetStorageImpl()) return {};
  return {it->second.origin, it->second.collective_id};
}

}  // namespace

void note_origin(const at::Tensor& t, Origin origin) {
  if (t.defined() && t.has_storage()) note_origin(t.storage(), origin);
}

void note_origin(const c10::Storage& storage, Origin origin) { note(storage, origin, OVF_NO_ID); }

uint32_t forget_origin(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? note(t.storage(), Origin::kNone, OVF_NO_ID) : OVF_NO_ID;
}

void note_received(const at::Tensor& t, uint32_t collective_id) {
  if (t.defined() && t.has_storage()) note(t.storage(), Origin::kReceived, collective_id);
}

Origin origin_of(const at::Tensor& t) { return noted_for(t).origin; }

uint32_t received_through(const at::Tensor& t) { return noted_for(t).collective_id; }

bool any_origins() { return origins().count.load(std::memory_order_relaxed) != 0; }

}  // namespace ovf
