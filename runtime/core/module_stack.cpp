// A small per-thread stack: forwards nest, and each thread runs its own.
#include "module_stack.h"

#include <utility>
#include <vector>

#include "ovf/ring.h"

namespace ovf {
namespace {

// Deeper nesting than this is not tracked (the innermost tracked module is
// reported); it keeps a runaway recursion from growing memory.
constexpr size_t kMaxDepth = 256;

struct Entry {
  const void* key;
  uint32_t name_id;
  uint64_t start_seq;
};

std::vector<Entry>& stack() {
  static thread_local std::vector<Entry> entries;
  return entries;
}

// Pushes beyond kMaxDepth are counted, not stored, so pops stay balanced.
thread_local size_t untracked = 0;

}  // namespace

void push_module(const void* key, uint32_t name_id, uint64_t start_seq) {
  auto& s = stack();
  if (s.size() >= kMaxDepth) {
    ++untracked;
    return;
  }
  s.push_back({key, name_id, start_seq});
}

uint64_t pop_module(const void* key) {
  if (untracked > 0) {
    --untracked;
    return OVF_NO_SEQ;
  }
  auto& s = stack();
  for (size_t i = s.size(); i > 0; --i) {
    if (s[i - 1].key == key) {
      const uint64_t start = s[i - 1].start_seq;
      s.resize(i - 1);
      return start;
    }
  }
  return OVF_NO_SEQ;
}

ModuleStackMark mark_modules() { return {stack().size(), untracked}; }

void return_to_mark(const ModuleStackMark& mark) {
  if (stack().size() > mark.depth) stack().resize(mark.depth);
  untracked = mark.untracked;
}

void clear_modules_on_thread() {
  stack().clear();
  untracked = 0;
}

uint32_t innermost_module() {
  const auto& s = stack();
  return s.empty() ? OVF_NO_ID : s.back().name_id;
}

}  // namespace ovf
