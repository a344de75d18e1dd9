"""ovf's commands in LLDB.

    (lldb) command script import <ovf>/lldb/ovf_lldb.py

or the same line in ~/.lldbinit (see lldbinit); `ovf-lldb` does it for one
session. It finds ovf_plugin in the source tree (../plugin) or the installed
layout, and the runtime's Python package (the one holding _bootstrap/) in the
source tree's build/python/ovf or the installed <prefix>/lib/ovf/python/ovf;
OVF_PACKAGE_DIR overrides the latter.

LLDB imports this file as the module `ovf_lldb` and resolves the command
classes and the breakpoint callback by name in it: they are exported here.
"""

import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
_plugin_dirs = [
    os.path.join(_top, "plugin"),  # the source tree; installed: <prefix>/share/ovf/plugin
    os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python")),
]  # installed beside ovf
# Only the first that has it: two copies on sys.path could mix versions.
_plugin = next(
    (d for d in _plugin_dirs if os.path.isdir(os.path.join(d, "ovf_plugin"))), _plugin_dirs[0]
)
for _path in (_here, _plugin):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import ovf_lldb_sb  # noqa: E402 - needs the paths above

stop_callback = ovf_lldb_sb.stop_callback
globals().update({cls.__name__: cls for cls in ovf_lldb_sb.COMMAND_CLASSES.values()})

PACKAGE_DIRS = [
    os.path.join(_top, "build", "python", "ovf"),  # the source tree, built in build/
    # installed: this file in <prefix>/share/ovf/lldb, the package in <prefix>/lib/ovf/python/ovf
    os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python", "ovf")),
]


def __lldb_init_module(debugger, internal_dict):
    ovf_lldb_sb.register(debugger, __name__, PACKAGE_DIRS)
