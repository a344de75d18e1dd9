"""ovf's commands in LLDB.

    (lldb) command script import <ovf>/lldb/ovf_lldb.py

or the same line in ~/.lldbinit (see lldbinit); `ovf-lldb` does it for one
session. It finds ovf_plugin in the source tree (../plugin), the layout of
`cmake --install` or a wheel's site-packages, and the runtime's Python package
(the one holding _bootstrap/) beside it (the source tree's build/python/ovf);
OVF_PACKAGE_DIR overrides the latter.

LLDB imports this file as the module `ovf_lldb` and resolves the command
classes and the breakpoint callback by name in it: they are exported here.
"""

import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
# (where ovf_plugin is, where the runtime's package is, put first on sys.path?) of each
# layout, as in gdb/ovf-gdb.py; the first whose plugin is there is the one used.
_layouts = [
    (os.path.join(_top, "plugin"), os.path.join(_top, "build", "python", "ovf"), True),  # source
    (  # `cmake --install`: this file in <prefix>/share/ovf/lldb
        os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python")),
        os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python", "ovf")),
        True,
    ),
    # a wheel: this file in site-packages/ovf/debuggers/lldb; that site-packages goes last:
    # LLDB's own Python may be another version than the venv's.
    (os.path.dirname(os.path.dirname(_top)), os.path.dirname(_top), False),
]
_plugin, _package, _first = next(
    (layout for layout in _layouts if os.path.isdir(os.path.join(layout[0], "ovf_plugin"))),
    _layouts[0],
)
if _here not in sys.path:
    sys.path.insert(0, _here)
if _plugin not in sys.path:
    sys.path.insert(0, _plugin) if _first else sys.path.append(_plugin)

import ovf_lldb_sb  # noqa: E402 - needs the paths above

stop_callback = ovf_lldb_sb.stop_callback
globals().update({cls.__name__: cls for cls in ovf_lldb_sb.COMMAND_CLASSES.values()})

PACKAGE_DIRS = [_package]


def __lldb_init_module(debugger, internal_dict):
    ovf_lldb_sb.register(debugger, __name__, PACKAGE_DIRS)
