# The file to `source` in gdb (or put in ~/.gdbinit, see gdbinit): registers
# ovf's commands. It finds ovf_plugin in the source tree (../plugin) or, once
# installed (<prefix>/share/ovf/gdb), beside the ovf package in
# <prefix>/lib/ovf/python, where `python3 -m ovf.postmortem` imports it too.
# The runtime's Python package is found the same two ways; OVF_PACKAGE_DIR
# overrides that.
import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
_plugin_dirs = [
    os.path.join(_top, "plugin"),  # the source tree
    os.path.normpath(os.path.join(_top, "..", "..", "lib", "ovf", "python")),
]  # installed
# Only the first that has it: two copies on sys.path could mix versions.
_plugin = next(
    (d for d in _plugin_dirs if os.path.isdir(os.path.join(d, "ovf_plugin"))), _plugin_dirs[0]
)
for _path in (_here, _plugin):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import ovf_gdb  # noqa: E402 - needs the paths above

ovf_gdb.register(
    package_dirs=[
        os.path.join(_top, "build", "python", "ovf"),  # the source tree, built in build/
        os.path.join(
            _top, "..", "..", "lib", "ovf", "python", "ovf"
        ),  # installed: <prefix>/share/ovf/gdb
    ]
)
