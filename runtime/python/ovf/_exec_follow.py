"""python3 -m ovf follows the program into an exec: a training script that replaces
itself (`os.execv(sys.executable, [...])`, a restart wrapper, a shell script that
execs Python) lost ovf without a word, since the new image starts with none of this
process's state. The wrapped os.execv and os.execve (every os.exec* function ends in
one of them) hand the new image the bootstrap (first on PYTHONPATH, OVF_ENABLE=1) and
this run's OVF_* options, so that it runs under ovf as the debuggers' `run` does, and
say so in one line: the new image's ring starts empty."""

import os
import sys

from .bootstrap import BOOTSTRAP_DIR


def _carried(env):
    out = {k: v for k, v in os.environ.items() if k.startswith("OVF_")}
    out.update(env)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOTSTRAP_DIR]
    out["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *parts])
    out["OVF_ENABLE"] = "1"
    return out


def install():
    """Wraps os.execv and os.execve for the rest of this process."""
    real_execve = os.execve

    def execve(path, args, env):
        print(
            f"ovf: the program execs {os.fsdecode(path) if not isinstance(path, int) else path}: "
            "ovf goes on in the new program (its ring starts empty)",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        real_execve(path, args, _carried(env))

    def execv(path, args):
        execve(path, args, os.environ)

    os.execv, os.execve = execv, execve
