"""Every `ovf` command: one module each, with an argparse parser whose help is
the command's help in the debugger, and a `run(session, args)` returning text."""

import argparse

from ovf_ring.errors import OvfError

from . import (
    abort_after,
    break_on_nan,
    frames,
    move_finish,
    move_next,
    move_step,
    plot,
    py_bt,
    py_locals,
    release,
    samples,
    status,
    step_into,
    trace_batches,
    watch,
)

COMMANDS = {
    m.NAME: m
    for m in (
        break_on_nan,
        frames,
        plot,
        py_bt,
        py_locals,
        step_into,
        move_next,
        move_step,
        move_finish,
        samples,
        status,
        watch,
        trace_batches,
        abort_after,
        release,
    )
}


class HelpRequested(Exception):
    """--help was given: the text to print instead of running the command."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports to the debugger instead of exiting the process."""

    def error(self, message):
        raise OvfError(f"{self.prog}: {message}\n{self.format_usage().rstrip()}")

    def exit(self, status=0, message=None):
        raise OvfError(message.strip() if message else f"{self.prog}: exit {status}")

    def print_help(self, file=None):
        raise HelpRequested(self.format_help())


def parser(name):
    module = COMMANDS[name]
    p = _Parser(
        prog=f"ovf {name}",
        description=module.__doc__.strip(),
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(p)
    return p


def help_text(name):
    return parser(name).format_help()


def execute(session, name, argv):
    """Runs `ovf NAME ARGV...`; returns the text to print or raises OvfError."""
    try:
        args = parser(name).parse_args(argv)
    except HelpRequested as h:
        return str(h)
    return COMMANDS[name].run(session, args)


def summary():
    """The `ovf` prefix command's help: one line per command."""
    width = max(map(len, COMMANDS))
    return "\n".join(
        f"  ovf {name:<{width}}  {m.__doc__.strip().splitlines()[0]}"
        for name, m in COMMANDS.items()
    )
