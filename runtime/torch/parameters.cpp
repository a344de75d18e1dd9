#include "parameters.h"

#include <atomic>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "ovf/ring.h"
#include "ring_writer.h"

namespace ovf {
namespace {

struct Owner {
  uint32_t module_id;
  uint32_t path_id;
};

// Written when modules are watched or forgotten, read by every op: a
// reader-writer lock, and a flag that keeps op lookups off the lock entirely
// where parameters do not name ops (Python).
struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const void*, Owner> by_impl;  // TensorImpl*
  std::unordered_map<const void*, uint32_t>
      by_storage;                // StorageImpl* -> module: views of a parameter
  std::vector<at::Tensor> keep;  // the addresses above stay theirs
  std::atomic<bool> names_ops{false};
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: ops may run during exit
  return *r;
}

}  // namespace

void register_parameter(const at::Tensor& param, uint32_t module_id, uint32_t path_id) {
  if (!param.defined()) return;
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  if (!r.by_impl.emplace(param.unsafeGetTensorImpl(), Owner{module_id, path_id}).second) return;
  if (param.has_storage()) r.by_storage.emplace(param.storage().unsafeGetStorageImpl(), module_id);
  r.keep.push_back(param);
}

void clear_parameters() {
  Registry& r = registry();
  std::vector<at::Tensor> released;
  {
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    r.by_impl.clear();
    r.by_storage.clear();
    released.swap(r.keep);
  }
  // the last references may free tensors: outside the lock
}

void set_op_context_from_parameters(bool on) {
  registry().names_ops.store(on, std::memory_order_release);
}

bool op_context_from_parameters() { return registry().names_ops.load(std::memory_order_acquire); }

uint32_t parameter_module(const at::Tensor& t) {
  Registry& r = registry();
  if (!r.names_ops.load(std::memory_order_acquire) || !t.defined()) return OVF_NO_ID;
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.by_impl.find(t.unsafeGetTensorImpl());
  if (it != r.by_impl.end()) return it->second.module_id;
  if (!t.has_storage() || r.by_storage.empty()) return OVF_NO_ID;
  auto st = r.by_storage.find(t.storage().unsafeGetStorageImpl());
  return st != r.by_storage.end() ? st->second : OVF_NO_ID;
}

uint32_t parameter_path(const at::Tensor& t) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.by_impl.find(t.unsafeGetTensorImpl());
  return it != r.by_impl.end() ? it->second.path_id : OVF_NO_ID;
}

bool module_within(uint32_t inner, uint32_t outer) {
  if (outer == OVF_NO_ID || inner == outer) return true;
  if (inner == OVF_NO_ID) return false;
  const std::string_view o = interned(outer), i = interned(inner);
  if (o.empty()) return true;  // the root module contains every path
  return i.size() > o.size() && i.compare(0, o.size(), o) == 0 && i[o.size()] == '.';
}

uint32_t gradient_owner(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return OVF_NO_ID;
  const void* storage = t.storage().unsafeGetStorageImpl();
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  for (const at::Tensor& param : r.keep) {
    const at::Tensor& grad = param.grad();
    if (grad.defined() && grad.has_storage() && grad.storage().unsafeGetStorageImpl() == storage)
      return r.by_impl.at(param.unsafeGetTensorImpl()).path_id;
  }
  return OVF_NO_ID;
}

std::string parameter_name(const at::Tensor& param, size_t index) {
  const uint32_t path = parameter_path(param);
  return path != OVF_NO_ID ? std::string(interned(path))
                           : "param_groups[...]params[" + std::to_string(index) + "]";
}

}  // namespace ovf
