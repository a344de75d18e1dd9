"""ovf's commands in LLDB.

    (lldb) command script import <ovf>/lldb/ovf_lldb.py

or the same line in ~/.lldbinit (see lldbinit); `ovf-lldb` does it for one
session. It finds ovf_plugin and the runtime's Python package (the one holding
_bootstrap/) in the source tree, the layout of `cmake --install` or a wheel's
site-packages (../frontend/ovf_layout.py); OVF_PACKAGE_DIR overrides the package.

LLDB imports this file as the module `ovf_lldb` and resolves the command
classes and the breakpoint callback by name in it: they are exported here.
"""

import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
for _path in (_here, os.path.join(_top, "frontend")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
import ovf_layout  # noqa: E402 - needs the paths above

_package = ovf_layout.use(_top)

import ovf_lldb_sb  # noqa: E402 - needs the paths above

stop_callback = ovf_lldb_sb.stop_callback
globals().update({cls.__name__: cls for cls in ovf_lldb_sb.COMMAND_CLASSES.values()})

PACKAGE_DIRS = [_package]


def __lldb_init_module(debugger, internal_dict):
    ovf_lldb_sb.register(debugger, __name__, PACKAGE_DIRS)
