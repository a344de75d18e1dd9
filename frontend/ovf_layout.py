"""Where ovf's debugger side and runtime package are, seen from a debugger front end
(gdb/ovf-gdb.py, lldb/ovf_lldb.py). The front ends and this directory are siblings in
every layout; `top` is their parent:

- the source tree: top/plugin, the package built in top/build/python/ovf;
- `cmake --install`: top is <prefix>/share/ovf, both in <prefix>/lib/ovf/python;
- a wheel: top is site-packages/ovf/debuggers, both in site-packages. That site-packages
  goes last on sys.path: the debugger's own Python may be another version than the venv's.

The first layout whose ovf_plugin is there is the one used: two copies on sys.path could
mix versions."""

import os
import sys


def use(top):
    """Puts the layout's ovf_plugin on sys.path; returns where its runtime package is."""
    prefix_python = os.path.normpath(os.path.join(top, "..", "..", "lib", "ovf", "python"))
    layouts = [
        (os.path.join(top, "plugin"), os.path.join(top, "build", "python", "ovf"), True),
        (prefix_python, os.path.join(prefix_python, "ovf"), True),
        (os.path.dirname(os.path.dirname(top)), os.path.dirname(top), False),
    ]
    plugin, package, first = next(
        (layout for layout in layouts if os.path.isdir(os.path.join(layout[0], "ovf_plugin"))),
        layouts[0],
    )
    if plugin not in sys.path:
        if first:
            sys.path.insert(0, plugin)
        else:
            sys.path.append(plugin)
    return package
