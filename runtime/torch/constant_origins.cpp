#include "constant_origins.h"

#include <mutex>
#include <unordered_map>

namespace ovf {
namespace {

// Masks live a batch or a few: a few thousand storages is plenty, and the map
// sheds freed ones when it grows past that.
constexpr size_t kMaxOrigins = 4096;

struct Origins {
  std::mutex mutex;  // ops run on autograd threads too
  std::unordered_map<const void*, c10::weak_intrusive_ptr<c10::StorageImpl>> by_storage;
};

Origins& origins() {
  static auto* o = new Origins();  // never destroyed: ops may run during exit
  return *o;
}

}  // namespace

void note_constant_origin(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  Origins& o = origins();
  std::lock_guard<std::mutex> lock(o.mutex);
  if (o.by_storage.size() >= kMaxOrigins) {
    for (auto it = o.by_storage.begin(); it != o.by_storage.end();) {
      it = it->second.expired() ? o.by_storage.erase(it) : std::next(it);
    }
    if (o.by_storage.size() >= kMaxOrigins) o.by_storage.clear();
  }
  const c10::Storage& storage = t.storage();
  o.by_storage.insert_or_assign(storage.unsafeGetStorageImpl(), storage.getWeakStorageImpl());
}

bool has_constant_origin(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return false;
  Origins& o = origins();
  std::lock_guard<std::mutex> lock(o.mutex);
  auto it = o.by_storage.find(t.storage().unsafeGetStorageImpl());
  if (it == o.by_storage.end()) return false;
  auto alive = it->second.lock();
  return alive && alive.get() == t.storage().unsafeGetStorageImpl();
}

}  // namespace ovf
