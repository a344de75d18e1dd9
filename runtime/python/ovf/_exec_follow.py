"""python3 -m ovf follows the program into an exec: a training script that replaces
itself (`os.execv(sys.executable, [...])`, a restart wrapper, a shell script that
execs Python) lost ovf without a word, since the new image starts with none of this
process's state. The wrapped os.execv and os.execve (every os.exec* function ends in
one of them; subprocess and multiprocessing do not use them) first judge what this
image still has on its way (fast device mode's last frames: a NaN there ends the
process with its status instead of being lost), then hand the new image the
bootstrap (first on PYTHONPATH, OVF_ENABLE=1) and this run's OVF_* options, so that it
runs under ovf as the debuggers' `run` does, and say so in one line: the new image's
ring starts empty."""

import os
import sys

from .bootstrap import BOOTSTRAP_DIR


def _carried(env):
    """`env` with the bootstrap and this run's options; bytes in, bytes out."""
    as_bytes = any(isinstance(k, bytes) for k in env)
    text = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
    out = {k: v for k, v in os.environ.items() if k.startswith("OVF_")}
    out.update(text)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOTSTRAP_DIR]
    out["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *parts])
    out["OVF_ENABLE"] = "1"
    return {os.fsencode(k): os.fsencode(v) for k, v in out.items()} if as_bytes else out


def _runnable(path):
    # os.execvp tries each PATH entry through os.execve: only the one that can
    # run is worth a word (and worth judging this image for).
    return isinstance(path, int) or os.access(path, os.X_OK)


def install():
    """Wraps os.execv and os.execve for the rest of this process."""
    real_execve = os.execve
    training = os.getpid()

    def execve(path, argv, env):
        if os.getpid() != training:
            # A forked child that runs another program (os.spawn*, pty.spawn) is
            # not the training going on: it execs as it would without ovf.
            real_execve(path, argv, env)
        if _runnable(path):
            hooks = sys.modules.get("ovf._hooks")  # none loaded: nothing was watched yet
            status = hooks.judge_pending(at_exit=False) if hooks is not None else 0
            if status:
                os._exit(status)
            if hooks is not None and hooks.went_on_after_nonfinite():
                # judged at the new program's exit (an exec keeps the process id)
                env = {**env, hooks.WENT_ON_VARIABLE: str(os.getpid())}
            name = path if isinstance(path, int) else os.fsdecode(path)
            print(
                f"ovf: the program execs {name}: ovf goes on in the new program "
                "(its ring starts empty)",
                file=sys.stderr,
                flush=True,
            )
            sys.stdout.flush()
        real_execve(path, argv, _carried(env))

    def execv(path, argv):
        execve(path, argv, os.environ)

    os.execv, os.execve = execv, execve
