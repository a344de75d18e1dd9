#include "hints.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

// Set by CMake: the source tree (its gdb/ and lldb/ hold the launchers of a
// build that was not installed), the package's place under an install prefix,
// and the interpreter ovf was built for.
#ifndef OVF_SOURCE_DIR
#define OVF_SOURCE_DIR ""
#endif
#ifndef OVF_PYTHON_INSTALL_DIR
#define OVF_PYTHON_INSTALL_DIR "lib/ovf/python"
#endif
#ifndef OVF_PYTHON_EXECUTABLE
#define OVF_PYTHON_EXECUTABLE "python3"
#endif

namespace ovf {

namespace {

std::string read_link(const char* path) {
  char buf[4096];
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The directory of libovf_runtime.so (the ovf package's directory).
std::string runtime_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&runtime_directory), &info) == 0 ||
      info.dli_fname == nullptr)
    return "";
  char resolved[4096];
  if (realpath(info.dli_fname, resolved) == nullptr) return directory_of(info.dli_fname);
  return directory_of(resolved);
}

bool executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

}  // namespace

namespace hints_detail {

std::string expand_core_pattern(const std::string& pattern, int pid, const std::string& comm,
                                const std::string& host, int uid, int gid, int signal,
                                bool uses_pid, const std::string& cwd) {
  std::string out;
  bool named_pid = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char spec = pattern[++i];
    switch (spec) {
      case 'p':
      case 'P':
      case 'i':
      case 'I':
        out += std::to_string(pid);  // the main thread aborts: its tid is the pid
        named_pid = true;
        break;
      case 'e': out += comm; break;
      case 'h': out += host; break;
      case 'u': out += std::to_string(uid); break;
      case 'g': out += std::to_string(gid); break;
      case 's': out += std::to_string(signal); break;
      case '%': out += '%'; break;
      default: out += '*';  // the time, the path, ...: only the kernel knows
    }
  }
  if (uses_pid && !named_pid) out += "." + std::to_string(pid);
  if (!out.empty() && out[0] != '/') out = cwd + "/" + out;
  return out;
}

std::string install_prefix_of(const std::string& library_dir, const std::string& python_dir) {
  const std::string tail = "/" + python_dir + "/ovf";
  if (python_dir.empty() || python_dir[0] == '/' || !ends_with(library_dir, tail)) return "";
  return library_dir.substr(0, library_dir.size() - tail.size());
}

std::string shell_quote(const std::string& word) {
  const char* safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_";
  if (!word.empty() && word.find_first_not_of(safe) == std::string::npos) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace hints_detail

std::string program_path() {
  const std::string exe = read_link("/proc/self/exe");
  return exe.empty() ? std::string("python3") : exe;
}

std::string launcher_path(const std::string& name) {
  const std::string library = runtime_directory();
  const std::string prefix = hints_detail::install_prefix_of(library, OVF_PYTHON_INSTALL_DIR);
  const std::string front_end = name.substr(name.rfind('-') + 1);  // "ovf-gdb" -> "gdb"
  for (const std::string& candidate :
       {prefix.empty() ? std::string() : prefix + "/bin/" + name,
        // a wheel: <venv>/lib/pythonX.Y/site-packages/ovf, its console script in <venv>/bin,
        // the launcher itself in ovf/debuggers
        ends_with(library, "/site-packages/ovf")
            ? directory_of(directory_of(directory_of(directory_of(library)))) + "/bin/" + name
            : std::string(),
        library + "/debuggers/" + front_end + "/" + name,
        std::string(OVF_SOURCE_DIR).empty()
            ? std::string()
            : std::string(OVF_SOURCE_DIR) + "/" + front_end + "/" + name}) {
    if (!candidate.empty() && executable(candidate)) return candidate;
  }
  return name;
}

std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

std::string core_file_path(int pid, std::string* piped_to) {
  const std::string pattern = first_line("/proc/sys/kernel/core_pattern");
  if (!pattern.empty() && pattern[0] == '|') {
    const std::string program = pattern.substr(1, pattern.find(' ') - 1);
    if (piped_to != nullptr) *piped_to = program;
    return "";
  }
  char cwd[4096] = "";
  if (getcwd(cwd, sizeof cwd) == nullptr) std::strcpy(cwd, ".");
  return hints_detail::expand_core_pattern(
      pattern.empty() ? "core" : pattern, pid, first_line("/proc/self/comm"), host_name(),
      static_cast<int>(getuid()), static_cast<int>(getgid()), 6 /* SIGABRT */,
      first_line("/proc/sys/kernel/core_uses_pid") == "1", cwd);
}

std::string postmortem_command(const std::string& core_word) {
  using hints_detail::shell_quote;
  const std::string program = program_path();
  const std::string python =
      base_name(program).rfind("python", 0) == 0 ? program : std::string(OVF_PYTHON_EXECUTABLE);
  const std::string package_parent = directory_of(runtime_directory());
  return "PYTHONPATH=" + shell_quote(package_parent) + " " + shell_quote(python) +
         " -m ovf.postmortem " + core_word;
}

}  // namespace ovf
