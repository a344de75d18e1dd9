"""python3 -m ovf.netcheck --nproc-per-node N: the ranks started on this host through
torch's launcher with the flags and stores the installed torch needs (see netcheck.py
and _torchrun.py), their lines printed in rank order, then one verdict line."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

RANK_LINE = re.compile(r"^ovf netcheck: rank (\d+) of (\d+) on .*?: (OK|FAILED): ")
TEE_PREFIX = re.compile(r"^\[[\w.-]*\]:")  # torch's --tee: "[default0]:"
LAUNCH_GRACE_S = 120  # on top of the ranks' own bounds: start-up, imports, teardown


def launcher_argv(args, log_dir, port):
    """The argv that starts the ranks: torch's launcher on this host only (its
    stores following USE_LIBUV: ovf._torchrun), with the options the installed
    torch needs, running this module in each rank."""
    argv = [
        sys.executable,
        "-m",
        "ovf._torchrun",
        "--nnodes",
        "1",
        "--nproc_per_node",
        str(args.nproc_per_node),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
    ]
    # Each rank's stdout to a log file and, whole lines prefixed "[default<rank>]:", to the
    # launcher's: ranks writing to one pipe at once could cut each other's lines. (torch
    # 1.x's launcher also fails on Python 3.11 without these options, before starting a
    # rank: "'NoneType' object has no attribute 'get'".)
    argv += ["--log_dir", log_dir, "--redirects", "1", "--tee", "1"]
    return argv + [
        "-m",
        "ovf.netcheck",
        "--backend",
        args.backend,
        "--timeout",
        repr(args.timeout),
        "--mib",
        repr(args.mib),
    ]


def launcher_env(environ, host=None):
    """(the launcher's and ranks' environment, lines to print first): this package
    first on PYTHONPATH; USE_LIBUV=0, TCPStores without libuv (torch >= 2.4 asks
    for it by default, and Debian's torch 2.6 is built without it; the old backend
    is all a check of N ranks needs); and, where this host's name does not resolve (Gloo binds
    to the address of the host name), Gloo on the loopback interface: the ranks
    are all on this host. What the caller set stays."""
    env, notes = dict(environ), []
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, env.get("PYTHONPATH", "")) if p)
    env.setdefault("USE_LIBUV", "0")
    host = socket.gethostname() if host is None else host
    if "GLOO_SOCKET_IFNAME" not in env and not _resolves(host):
        env["GLOO_SOCKET_IFNAME"] = "lo"
        notes.append(
            f"ovf netcheck: the host name {host!r} does not resolve: Gloo uses the loopback "
            "interface (GLOO_SOCKET_IFNAME=lo)"
        )
    return env, notes


def _resolves(host):
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return True


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Starts the ranks and, once the launcher has ended, prints each rank's
    line in rank order, the hints they gave, and one verdict line; 0 when every
    rank passed."""
    n = args.nproc_per_node
    passed, failed, other, results = set(), set(), [], []
    with tempfile.TemporaryDirectory(prefix="ovf-netcheck-") as log_dir:
        argv = launcher_argv(args, log_dir, _free_port())
        env, notes = launcher_env(os.environ)
        for line in notes:
            print(line, flush=True)
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                env=env,
                start_new_session=True,  # the launcher and its ranks end together
            )
        except OSError as e:
            print(f"ovf netcheck: cannot start {sys.executable}: {e.strerror}", file=sys.stderr)
            return 2
        deadline = time.monotonic() + 5 * args.timeout + LAUNCH_GRACE_S
        timer = _Alarm(deadline, proc)
        try:
            for raw in proc.stdout:
                line = TEE_PREFIX.sub("", raw.rstrip("\n"))
                match = RANK_LINE.match(line)
                if match:
                    (passed if match.group(3) == "OK" else failed).add(int(match.group(1)))
                    results.append((int(match.group(1)), line))
                elif line.startswith("ovf netcheck: "):
                    if line not in other:  # the hint each failed rank prints
                        other.append(line)
                elif line.strip():
                    other.append(line)
            status = proc.wait()
        except KeyboardInterrupt:
            _kill_group(proc, signal.SIGTERM)
            proc.wait()
            for _, line in sorted(results, key=lambda result: result[0]):
                print(line)
            print("ovf netcheck: FAILED: interrupted", flush=True)
            return 1
        finally:
            timer.cancel()
    hints = [line for line in other if line.startswith("ovf netcheck: ")]
    for _, line in sorted(results, key=lambda result: result[0]):  # rank order
        print(line)
    for line in hints:
        print(line)
    silent = [r for r in range(n) if r not in passed and r not in failed]
    if status == 0 and len(passed) == n and not failed:
        print(
            f"ovf netcheck: OK: all {n} ranks on {socket.gethostname()} joined, all-reduced "
            "and met at the barrier",
            flush=True,
        )
        return 0
    if silent and not hints:  # no rank said why: the launcher's own words
        for line in [line for line in other if not line.startswith("ovf netcheck: ")][-15:]:
            print(f"  {line}", file=sys.stderr)
    why = [f"{len(passed)} of {n} ranks passed"]
    if failed:
        why.append("failed: " + _rank_list(sorted(failed)))
    if silent:
        why.append("no result from " + _rank_list(silent))
    if timer.fired:
        why.append(f"the launcher ran past {timer.limit:g} s and was stopped")
    elif status != 0:
        why.append(f"the launcher exited with status {status}")
    print(f"ovf netcheck: FAILED: {'; '.join(why)}", flush=True)
    return 1


def _rank_list(ranks):
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class _Alarm:
    """Ends the launcher's process group at `deadline` (monotonic) if it is still running."""

    def __init__(self, deadline, proc):
        import threading

        self.fired = False
        self.limit = max(0.0, deadline - time.monotonic())
        self._proc = proc
        self._timer = threading.Timer(self.limit, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self):
        if self._proc.poll() is None:
            self.fired = True
            _kill_group(self._proc, signal.SIGKILL)

    def cancel(self):
        self._timer.cancel()
