# The file to `source` in gdb (or put in ~/.gdbinit, see gdbinit): registers
# ovf's commands. It finds ovf_plugin and the runtime's Python package in the
# source tree, the layout of `cmake --install` or a wheel's site-packages
# (../frontend/ovf_layout.py); OVF_PACKAGE_DIR overrides the package.
import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
_top = os.path.dirname(_here)
for _path in (_here, os.path.join(_top, "frontend")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
import ovf_layout  # noqa: E402 - needs the paths above

_package = ovf_layout.use(_top)

import ovf_gdb  # noqa: E402 - needs the paths above

ovf_gdb.register(package_dirs=[_package])
