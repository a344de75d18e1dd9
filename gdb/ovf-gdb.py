# The file to `source` in gdb (or put in ~/.gdbinit, see gdbinit): registers
# ovf's commands. It finds ovf_plugin beside it (../plugin) and the runtime's
# Python package in the source tree or the installed layout; OVF_PACKAGE_DIR
# overrides the latter.
import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
for _path in (_here, os.path.join(_top, "plugin")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import ovf_gdb  # noqa: E402 - needs the paths above

ovf_gdb.register(package_dirs=[
    os.path.join(_top, "build", "python", "ovf"),  # the source tree, built in build/
    os.path.join(_top, "..", "..", "lib", "ovf", "python", "ovf"),  # installed: <prefix>/share/ovf/gdb
])
