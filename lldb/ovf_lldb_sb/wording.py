"""ovf_plugin's messages name gdb's commands where they tell the user what to
do next; under LLDB they name LLDB's."""

import re

_LLDB = [
    (re.compile(r"\bgdb -p\b"), "lldb -p"),
    (re.compile(r"\bovf-gdb\b"), "ovf-lldb"),
    (re.compile(r"\bstarting gdb\b"), "starting lldb"),
    # Older ovf_plugin wording of Target.library_hint().
    (re.compile(r"point the debugger at it with: set solib-search-path DIR"), None),
]


def for_lldb(text, target=None):
    """`text` with gdb's commands replaced by LLDB's."""
    if not text:
        return text
    for pattern, replacement in _LLDB:
        if replacement is None:
            if target is None:
                continue
            replacement = target.library_hint()
        text = pattern.sub(lambda _: replacement, text)
    return text
