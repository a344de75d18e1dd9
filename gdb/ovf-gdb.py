# The file to `source` in gdb (or put in ~/.gdbinit, see gdbinit): registers
# ovf's commands. It finds ovf_plugin in the source tree (../plugin), once
# installed by CMake (<prefix>/share/ovf/gdb) beside the ovf package in
# <prefix>/lib/ovf/python, or in a wheel's site-packages, where
# `python3 -m ovf.postmortem` imports it too.
# The runtime's Python package is found the same two ways; OVF_PACKAGE_DIR
# overrides that.
import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
# (where ovf_plugin is, where the runtime's package is, put first on sys.path?) of each
# layout; the first whose plugin is there is the one used: two copies on sys.path could
# mix versions.
_layouts = [
    (os.path.join(_top, "plugin"), os.path.join(_top, "build", "python", "ovf"), True),  # source
    (  # `cmake --install`: this file in <prefix>/share/ovf/gdb
        os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python")),
        os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python", "ovf")),
        True,
    ),
    # a wheel: this file in site-packages/ovf/debuggers/gdb. That site-packages goes last
    # on sys.path: gdb's own Python may be another version than the venv's.
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

import ovf_gdb  # noqa: E402 - needs the paths above

ovf_gdb.register(package_dirs=[_package])
