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
# What one rank holds once torch is imported and its process group is up (pip's CUDA
# torch measured 635 MiB of RSS on the CPU): the bound on the ranks one host can start.
RANK_MIB = 640
STOP_GRACE_S = 10  # how long the ranks get to leave after SIGTERM before SIGKILL


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
    fits = ranks_that_fit()
    if n > fits:
        print(
            f"ovf netcheck: --nproc-per-node {n}: this host has memory for {fits} ranks "
            f"(each takes about {RANK_MIB} MiB with torch loaded; "
            f"{_available_mib() / 1024:.1f} GiB available): give at most {fits}",
            file=sys.stderr,
        )
        return 2
    passed, failed, other, results = set(), set(), [], []
    with tempfile.TemporaryDirectory(prefix="ovf-netcheck-") as log_dir:
        argv = launcher_argv(args, log_dir, _free_port())
        env, notes = launcher_env(os.environ)
        for line in notes:
            print(line, flush=True)
        # The ranks run in a session of their own: a signal that ends this front
        # end must end them too, or they go on as orphans. One that comes while
        # the launcher starts is noted and acted on once it has a pid.
        received = []
        previous = {sig: signal.signal(sig, _noter(received)) for sig in ENDING_SIGNALS}
        previous[signal.SIGINT] = signal.getsignal(signal.SIGINT)
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
            _restore(previous)
            print(f"ovf netcheck: cannot start {sys.executable}: {e.strerror}", file=sys.stderr)
            return 2
        deadline = time.monotonic() + 5 * args.timeout + LAUNCH_GRACE_S
        timer = _Alarm(deadline, proc)
        for sig in ENDING_SIGNALS:
            signal.signal(sig, _interrupt)
        try:
            if received:
                raise _Interrupted(signal.Signals(received[0]).name)
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
        except (KeyboardInterrupt, _Interrupted) as e:
            # A second signal must not cut the ending of the ranks short.
            for sig in (*ENDING_SIGNALS, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            _end_tree(proc)
            for _, line in sorted(results, key=lambda result: result[0]):
                print(line)
            why = f" by {e}" if isinstance(e, _Interrupted) else ""
            print(f"ovf netcheck: FAILED: interrupted{why}", flush=True)
            return 1
        finally:
            timer.cancel()
            _restore(previous)
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


ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _noter(received):
    def note(signum, frame):
        received.append(signum)

    return note


def _restore(previous):
    """Puts back the handlers `previous` holds."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


class _Interrupted(Exception):
    """SIGTERM or SIGHUP reached the front end; the text names it."""


def _interrupt(signum, frame):
    raise _Interrupted(signal.Signals(signum).name)


def _available_mib():
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) // 1024


def ranks_that_fit():
    """How many ranks this host's available memory holds (at least 1)."""
    return max(1, _available_mib() // RANK_MIB)


def _rank_list(ranks):
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def process_tree(pid):
    """The processes under `pid` at any depth: torch's launcher may start its ranks
    outside its own process group, where a signal to the group does not reach."""
    out, todo = [], [pid]
    while todo:
        found = []
        try:  # each thread's children: a launcher may start ranks from any thread
            for task in os.listdir(f"/proc/{todo[0]}/task"):
                with open(f"/proc/{todo[0]}/task/{task}/children") as f:
                    found += [int(p) for p in f.read().split()]
        except OSError:
            pass
        todo = todo[1:] + found
        out += found
    return out


def _end_tree(proc):
    """SIGTERM to the launcher and every rank (a rank in a blocking call may not
    act on it), SIGKILL to what is left after STOP_GRACE_S. The ranks are listed
    first: once the launcher is gone they are no longer found under it."""
    ranks = process_tree(proc.pid)
    _kill_group(proc, signal.SIGTERM)
    for pid in ranks:
        _signal(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + STOP_GRACE_S
    while any(running(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in ranks:
        if running(pid):
            _signal(pid, signal.SIGKILL)


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


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
            _end_tree(self._proc)  # the ranks too, wherever the launcher put them

    def cancel(self):
        self._timer.cancel()
