#include "response.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "control.h"
#include "ovf/ring.h"

namespace ovf {

const char* const kOverflowMessage =
    "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further. "
    "Please scroll up above this traceback to see the activation values prior to this event.";

std::string abort_message() {
  return "ovf: non-finite value detected; aborting so that the kernel writes a core file "
         "(open it with: gdb python3 core, then: ovf frames; or without a debugger: "
         "python3 -m ovf.postmortem core)";
}

std::string attach_instructions(int pid) {
  const std::string p = std::to_string(pid);
  // Under torchrun the ranks' output interleaves and gdb -p works only on the
  // rank's own host: name both. A single process reads as before.
  std::string who = "process " + p, where;
  if (ovf_state.rank >= 0) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    who = "rank " + std::to_string(ovf_state.rank) + " of " + std::to_string(ovf_state.world_size) +
          " (process " + p + " on " + host + ")";
    where = std::string(" on ") + host;
  }
  return "ovf: " + who + " is waiting for a debugger. Attach" + where + " with one of:\n" +
         "    gdb -p " + p + " -ex 'ovf frames'\n" + "    lldb -p " + p + " -o 'ovf frames'\n" +
         "ovf: then 'ovf release' and 'continue' let training go on.\n";
}

void abort_now(const std::string& message) {
  std::fflush(nullptr);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

bool wait_for_release(const std::function<bool()>& interrupted) {
  uint32_t* released = &ovf_state.control.wait_released;
  while (read_control(*released) == 0) {
    if (interrupted && interrupted()) return false;
    usleep(100 * 1000);
  }
  *const_cast<volatile uint32_t*>(released) = 0;
  return true;
}

bool enable_core_dumps() {
  rlimit limit;
  if (getrlimit(RLIMIT_CORE, &limit) != 0) return false;
  limit.rlim_cur = limit.rlim_max;
  return setrlimit(RLIMIT_CORE, &limit) == 0 && limit.rlim_cur != 0;
}

}  // namespace ovf
