#include "snapshot.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "report.h"
#include "ring_writer.h"

namespace ovf {
namespace {

// On the heap, like the ring's records: LLDB's save-core keeps the heap pages a
// process wrote, but not every page of a library's .bss.
ovf_snapshot& snapshot_buffer() {
  static auto* buffer = new ovf_snapshot();  // never freed: a debugger may read it at exit
  return *buffer;
}
std::atomic<SnapshotWriter> g_writer{nullptr};
std::mutex g_mutex;  // one event's snapshot at a time (ops fire on autograd threads too)

}  // namespace

void set_snapshot_writer(SnapshotWriter writer) {
  g_writer.store(writer, std::memory_order_release);
}

void take_snapshot(uint64_t event_seq) {
  const SnapshotWriter writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  ovf_snapshot& s = snapshot_buffer();
  __atomic_store_n(&s.complete, 0u, __ATOMIC_RELEASE);
  s.magic = OVF_SNAPSHOT_MAGIC;
  s.version = OVF_SNAPSHOT_VERSION;
  s.size = sizeof(ovf_snapshot);
  s.event_seq = event_seq;
  s.frame_count = 0;
  s.local_count = 0;
  s.frame_locals = 0;
  s.thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  writer(&s);
  __atomic_store_n(&s.complete, 1u, __ATOMIC_RELEASE);
  __atomic_store_n(&ovf_state.snapshot_addr, reinterpret_cast<uint64_t>(&s), __ATOMIC_RELEASE);
}

std::string user_line_at(uint64_t event_seq) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const ovf_snapshot& s = snapshot_buffer();
  if (s.complete != 1 || s.event_seq != event_seq) return "";
  const uint32_t count = std::min<uint32_t>(s.frame_count, OVF_SNAPSHOT_FRAMES);
  for (uint32_t i = 0; i < count; ++i) {
    const ovf_snapshot_frame& f = s.frames[i];
    if (!(f.flags & OVF_SNAP_USER)) continue;
    std::string file = f.file_id == OVF_NO_ID ? "?" : std::string(interned(f.file_id));
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    const std::string function =
        f.function_id == OVF_NO_ID ? "?" : std::string(interned(f.function_id));
    return escape_text(file) + ":" + std::to_string(f.line) + " in " + escape_text(function);
  }
  return "";
}

}  // namespace ovf
