// The commands the process prints for opening its core or attaching (hints.cpp):
// kernel.core_pattern expanded as the kernel does it, the install prefix found
// from the package's directory, and shell quoting.
#include <gtest/gtest.h>

#include "hints.h"

namespace ovf::hints_detail {
namespace {

std::string expand(const std::string& pattern, bool uses_pid = false) {
  return expand_core_pattern(pattern, 4242, "python3", "box", 1000, 100, 6, uses_pid, "/work");
}

TEST(Hints, CorePatternNamesTheFileTheKernelWrites) {
  EXPECT_EQ(expand("core"), "/work/core");
  EXPECT_EQ(expand("core", true), "/work/core.4242");     // core_uses_pid
  EXPECT_EQ(expand("core.%p", true), "/work/core.4242");  // the pid is named: not twice
  EXPECT_EQ(expand("/var/crash/%e.%p.%h.%u.%g.%s"), "/var/crash/python3.4242.box.1000.100.6");
  EXPECT_EQ(expand("/cores/%e-%t-%%"), "/cores/python3-*-%");  // the time only the kernel knows
  EXPECT_EQ(expand("core%"), "/work/core%");                   // a lone % at the end stays
}

TEST(Hints, InstallPrefixOnlyForTheInstalledLayout) {
  EXPECT_EQ(install_prefix_of("/opt/ovf/lib/ovf/python/ovf", "lib/ovf/python"), "/opt/ovf");
  EXPECT_EQ(install_prefix_of("/work/main/build/python/ovf", "lib/ovf/python"), "");
  EXPECT_EQ(install_prefix_of("/opt/ovf/lib/ovf/python/ovf", "/abs/path"), "");
  EXPECT_EQ(install_prefix_of("/opt/ovf/lib/ovf/python/ovf", ""), "");
}

TEST(Hints, ShellQuotingOnlyWhereNeeded) {
  EXPECT_EQ(shell_quote("/usr/bin/python3.11"), "/usr/bin/python3.11");
  EXPECT_EQ(shell_quote("/tmp/my dir/core"), "'/tmp/my dir/core'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$(rm -rf ~)"), "'$(rm -rf ~)'");
}

}  // namespace
}  // namespace ovf::hints_detail
