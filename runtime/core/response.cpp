#include "response.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "control.h"
#include "hints.h"
#include "ovf/ring.h"

namespace ovf {

const char* const kOverflowMessage =
    "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further. "
    "Please scroll up above this traceback to see the activation values prior to this event.";

namespace {

// A path for a shell, its `*` (what only the kernel knows) left to expand.
std::string shell_path(const std::string& path) {
  std::string out;
  size_t start = 0;
  for (size_t star; (star = path.find('*', start)) != std::string::npos; start = star + 1)
    out += hints_detail::shell_quote(path.substr(start, star - start)) + "*";
  return out + hints_detail::shell_quote(path.substr(start));
}

// The three ways to read `core` (a shell word): gdb, LLDB, no debugger.
std::string open_core_commands(const std::string& core) {
  const std::string program = hints_detail::shell_quote(program_path());
  return "    " + hints_detail::shell_quote(launcher_path("ovf-gdb")) + " " + program + " " + core +
         " -ex 'ovf frames'\n" + "    " + hints_detail::shell_quote(launcher_path("ovf-lldb")) +
         " -c " + core + " " + program + " -o 'ovf frames'\n" + "    " + postmortem_command(core) +
         "\n";
}

}  // namespace

std::string abort_message(const std::string& what) {
  const int pid = getpid();
  std::string piped_to;
  const std::string core = core_file_path(pid, &piped_to);
  std::string text = "ovf: " + what + "; aborting so that the kernel writes a core file";
  if (core.empty()) {
    text += ". The kernel hands core files to " + piped_to +
            " (kernel.core_pattern): save this one (process " + std::to_string(pid) +
            ") from there as ./core (with systemd-coredump: coredumpctl dump " +
            std::to_string(pid) + " --output=core), then open it with one of:\n" +
            open_core_commands("core");
  } else {
    text += " (" + core + "); open it with one of:\n" + open_core_commands(shell_path(core));
  }
  return text.substr(0, text.size() - 1);  // abort_now ends the line
}

std::string attach_instructions(int pid) {
  const std::string p = std::to_string(pid);
  // Under torchrun the ranks' output interleaves and gdb -p works only on the
  // rank's own host: name both. A single process reads as before.
  std::string who = "process " + p, where;
  if (ovf_state.rank >= 0) {
    const std::string host = host_name();
    who = "rank " + std::to_string(ovf_state.rank) + " of " + std::to_string(ovf_state.world_size) +
          " (process " + p + " on " + host + ")";
    where = " on " + host;
  }
  return "ovf: " + who + " is waiting for a debugger. Attach" + where + " with one of:\n" + "    " +
         hints_detail::shell_quote(launcher_path("ovf-gdb")) + " -p " + p + " -ex 'ovf frames'\n" +
         "    " + hints_detail::shell_quote(launcher_path("ovf-lldb")) + " -p " + p +
         " -o 'ovf frames'\n" + "ovf: then 'ovf release' and 'continue' let training go on.\n";
}

void abort_now(const std::string& message) {
  std::fflush(nullptr);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

WaitEnd wait_for_release(const std::function<bool()>& interrupted, double timeout_s) {
  uint32_t* released = &ovf_state.control.wait_released;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (read_control(*released) == 0) {
    if (interrupted && interrupted()) return WaitEnd::kInterrupted;
    if (timeout_s > 0 && std::chrono::steady_clock::now() >= deadline) return WaitEnd::kTimedOut;
    usleep(100 * 1000);
  }
  *const_cast<volatile uint32_t*>(released) = 0;
  return WaitEnd::kReleased;
}

namespace {

// Whether a debugger (any ptrace tracer) is attached: TracerPid in /proc/self/status.
bool traced() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return true;  // cannot tell: trust the control block
  char line[256];
  long tracer = 0;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "TracerPid: %ld", &tracer) == 1) break;
  }
  std::fclose(status);
  return tracer != 0;
}

}  // namespace

uint32_t effective_on_event() {
  const uint32_t on_event = read_control(ovf_state.control.on_event);
  const uint32_t own = ovf_state.own_on_event;
  if (on_event != OVF_ON_EVENT_CONTINUE || own == OVF_ON_EVENT_CONTINUE || traced())
    return on_event;
  ovf_state.control.on_event = own;  // the debugger is gone: the process's own mode again
  ovf_state.control.generation++;
  return own;
}

void reach_stop_hook(const ovf_record* record, uint32_t events) {
  if (traced()) ovf_stop_event(record, events);
}

bool enable_core_dumps() {
  rlimit limit;
  if (getrlimit(RLIMIT_CORE, &limit) != 0) return false;
  limit.rlim_cur = limit.rlim_max;
  return setrlimit(RLIMIT_CORE, &limit) == 0 && limit.rlim_cur != 0;
}

}  // namespace ovf
