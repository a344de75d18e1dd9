// How the user opens this process or its core file, in commands that work as
// printed on a stock machine: ovf's own launchers by absolute path (a plain
// `gdb` has no `ovf` command), the program's real path (`python3` may be a
// pyenv shim gdb cannot run), the core file's real name (kernel.core_pattern),
// and the post-mortem reader with an interpreter and PYTHONPATH that have ovf.
#ifndef OVF_HINTS_H
#define OVF_HINTS_H

#include <string>

namespace ovf {

// "/usr/bin/python3.11": the running program (/proc/self/exe).
std::string program_path();

// This machine's name (gethostname), "" when it has none.
std::string host_name();

// The absolute path of ovf's launcher `name` ("ovf-gdb", "ovf-lldb") beside this
// runtime (installed: <prefix>/bin; a wheel: ovf/debuggers/<debugger>; built: the
// source tree), or `name` itself when there is none.
std::string launcher_path(const std::string& name);

// Where the kernel writes this process's core, from kernel.core_pattern and
// core_uses_pid: a path (absolute), a glob where the pattern names what only
// the kernel knows (%t, ...), or "" when cores are piped to a program
// (systemd-coredump, apport); `piped_to` then names it.
std::string core_file_path(int pid, std::string* piped_to);

// `PYTHONPATH=<dir> <python> -m ovf.postmortem CORE`: a Python program's own
// interpreter, else the one ovf was built for; `core_word` is put as it is (a
// shell word, quoted by the caller).
std::string postmortem_command(const std::string& core_word);

// Pure string functions behind the ones above (tested on their own).
namespace hints_detail {
// kernel.core_pattern expanded for one process: %p %P %i %I pid/tid, %e comm,
// %h host, %u %g ids, %s signal, %% a percent sign; anything else becomes *.
std::string expand_core_pattern(const std::string& pattern, int pid, const std::string& comm,
                                const std::string& host, int uid, int gid, int signal,
                                bool uses_pid, const std::string& cwd);
// The prefix whose `python_dir` (e.g. "lib/ovf/python") holds `library_dir`'s
// ovf package, or "" when `library_dir` is not <prefix>/<python_dir>/ovf.
std::string install_prefix_of(const std::string& library_dir, const std::string& python_dir);
// A word quoted for a POSIX shell where it needs it.
std::string shell_quote(const std::string& word);
}  // namespace hints_detail

}  // namespace ovf

#endif  // OVF_HINTS_H
