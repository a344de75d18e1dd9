"""Helpers of the multi-rank tests: two-rank Gloo jobs on CPU started with torch's
launcher (through python3 -m ovf._torchrun, whose stores follow USE_LIBUV=0: Debian's
torch 2.6 has no libuv) on a free loopback port, every process under a
timeout and killed with its whole process group when it runs past it.

Every launch passes --redirects 1 --tee 1: each rank's stdout goes to
LOG_DIR/<run>/attempt_0/<rank>/stdout.log and, with a "[default<rank>]:" prefix
and whole lines (without --tee ranks cut each other's lines), to the launcher's stdout.
"""

import glob
import os
import re
import resource
import signal
import socket
import subprocess
import time

from build_paths import PACKAGE_PARENT, PYTHON

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(TOP, "build"))
RANKS_SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "ranks.py")
TIMEOUT = 180


def env(**extra):
    """A minimal environment with the build's package; Gloo on the loopback only."""
    out = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": PACKAGE_PARENT,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        # Debian's torch 2.6 is built without libuv, which its TCPStore asks for by default
        "USE_LIBUV": "0",
    }
    out.update(extra)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, log_dir, *args):
    """The argv of a launch of `nproc` ranks on this host, 127.0.0.1 only."""
    return [
        PYTHON,
        "-m",
        "ovf._torchrun",  # torch.distributed.run whose stores follow USE_LIBUV (Debian's 2.6)
        "--nproc_per_node",
        str(nproc),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        "--log_dir",
        str(log_dir),
        "--redirects",
        "1",
        "--tee",
        "1",
        # how often the launcher looks at its ranks (and kills the others once one has
        # died): 5 s instead of torch 2.x's 0.1 s; a rank that aborts a
        # second after another must still write its core
        "--monitor_interval",
        "5",
        *args,
    ]


def run(argv, timeout=TIMEOUT, **kwargs):
    """subprocess.run with stdout+stderr together; on timeout the process group dies."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(argv)} ran past {timeout} s:\n{as_text(out)}") from None
    return subprocess.CompletedProcess(argv, proc.returncode, as_text(out))


def as_text(output):
    """The launcher's bytes as text. Once, under CI's load, a launch's output ended in
    bytes that are not UTF-8 (written after both ranks' last lines; their source was not
    found): they show as \\x escapes in a failing assertion's message instead of ending
    the test in a UnicodeDecodeError."""
    return output.decode("utf-8", errors="backslashreplace")


def kill_group(proc):
    """Kills a launcher's process group and its ranks: torchrun starts each rank in a
    session of its own, so a rank waiting for a debugger (--on-nan wait) outlived the
    group's kill and waited on after the test, 2 GB each."""
    ranks = rank_pids(proc.pid).values()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def rank_stdout(log_dir, rank):
    """What local rank `rank` printed on stdout (the launcher's per-rank log)."""
    paths = glob.glob(os.path.join(str(log_dir), "*", "attempt_0", str(rank), "stdout.log"))
    assert len(paths) == 1, paths
    with open(paths[0]) as f:
        return f.read()


def rank_lines(launcher_output, rank):
    """The lines of local rank `rank` in the launcher's (prefixed) output."""
    prefix = f"[default{rank}]:"
    return [line[len(prefix) :] for line in launcher_output.splitlines() if line.startswith(prefix)]


def kernel_cores_here():
    """Why kernel cores cannot land in a rank's working directory here, or None (ovf
    lifts the soft core size limit to the hard one, which must not be 0)."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern not in ("core", "core.%p"):
        return f"kernel cores do not go to the working directory (core_pattern {pattern!r})"
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        return "the hard core size limit is 0"
    return None


def rank_pids(pid):
    """{RANK: pid} of the launcher's worker processes."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"RANK" in environ:
            found[int(environ[b"RANK"])] = int(entry)
    return found


def wait_for_rank(log_dir, rank, text, proc, timeout=TIMEOUT):
    """What `rank` printed, once it has printed `text`."""
    deadline = time.time() + timeout
    while True:
        try:
            printed = rank_stdout(log_dir, rank)
        except AssertionError:  # its log is not there yet
            printed = ""
        if text in printed:
            return printed
        assert proc.poll() is None and time.time() < deadline, printed
        time.sleep(0.2)


def assert_amp_replay(lines):
    """`lines` (three lines of text on) name what the replay found at rank 1's event in
    ranks.py --inf-at 1:N: its line, then the op inside blocks.1.amp (its gain, 1e39,
    cast to float32 for the multiplication) with its line, why and verdict."""
    assert re.fullmatch(
        r"  replay: replayed the forward of Net with its ops observed \(\d+\.\d\d s\)", lines[0]
    ), lines
    assert lines[1:4] == [
        "    produced by aten::to in blocks.1.amp at diverge.py:29 in forward",
        "    why: aten::to to float32: input abs max 1.00e+39 > 3.40282e+38",
        "    verdict: finite in float64 (abs max 1.00e+39): float32's range or precision here",
    ], lines
