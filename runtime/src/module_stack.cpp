// A small per-thread stack: forwards nest, and each thread runs its own.
#include "ovf/module_stack.h"

#include <utility>
#include <vector>

#include "ovf/ring.h"

namespace ovf {
namespace {

// Deeper nesting than this is not tracked (the innermost tracked module is
// reported); it keeps a runaway recursion from growing memory.
constexpr size_t kMaxDepth = 256;

std::vector<std::pair<const void*, uint32_t>>& stack() {
  static thread_local std::vector<std::pair<const void*, uint32_t>> entries;
  return entries;
}

// Pushes beyond kMaxDepth are counted, not stored, so pops stay balanced.
thread_local size_t untracked = 0;

}  // namespace

void push_module(const void* key, uint32_t name_id) {
  auto& s = stack();
  if (s.size() >= kMaxDepth) {
    ++untracked;
    return;
  }
  s.emplace_back(key, name_id);
}

void pop_module(const void* key) {
  if (untracked > 0) {
    --untracked;
    return;
  }
  auto& s = stack();
  for (size_t i = s.size(); i > 0; --i) {
    if (s[i - 1].first == key) {
      s.resize(i - 1);
      return;
    }
  }
}

void clear_modules_on_thread() {
  stack().clear();
  untracked = 0;
}

uint32_t innermost_module() {
  const auto& s = stack();
  return s.empty() ? OVF_NO_ID : s.back().second;
}

}  // namespace ovf
