"""python3 -m ovf.netcheck --nproc-per-node N [--backend gloo|nccl] [--timeout S]
python3 -m torch.distributed.run --nproc_per_node N -m ovf.netcheck [--timeout S]

The network check of the reference's multi-GPU debugging notes: every rank joins
the process group (NCCL with GPUs, Gloo without), allocates device memory (a CPU
tensor without a GPU), all-reduces it and meets the others at a barrier, then
prints one line: OK, with its host, rank and device. When a rank does not answer
within the timeout, the others say which rank it is and how far it got.

Each step is bounded by --timeout, so a dead or stuck rank is named instead of
hanging the job: the ranks report their progress in the launcher's rendezvous
store, and the collectives run asynchronously and are polled.

With --nproc-per-node N (and no launcher around it) it starts the N ranks on
this host itself, through torch's launcher with what the installed torch needs
(--redirects 1 --tee 1, so that every rank's lines come whole; on torch >= 2.4
built without libuv, as Debian's 2.6, stores without libuv: see ovf._torchrun),
prints the ranks' lines and one verdict line. Under a launcher (RANK and
WORLD_SIZE set) it is one rank. Exit status: 0 OK, 1 the check
failed, 2 not started by a launcher (or the launcher could not start).
"""

import argparse
import datetime
import os
import signal
import socket
import sys
import time

PHASES = ("joined", "initialised", "allocated", "all-reduced", "done")
# In the launcher's store (counters read with add(key, 0), which every torch's
# binding has): each rank's host and the number of
# steps it has finished, to name the laggards, and how many ranks have joined.
HOST = "ovf-netcheck/host{}"
STEPS = "ovf-netcheck/steps{}"
JOINED = "ovf-netcheck/joined"
ALIVE = "ovf-netcheck/alive{}"  # signed in by the ranks still there after a failed collective
SURVIVOR_WAIT_S = 2.0  # short: the launcher ends every rank within seconds of a failure
POLL_FIRST_S, POLL_MAX_S = 0.0002, 0.05


class Failed(Exception):
    """The check cannot go on; the text says what this rank saw."""


class Stopped(Exception):
    """A signal ended the check (the launcher's SIGTERM, ^C)."""


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m ovf.netcheck", description=__doc__.split("\n\n")[1]
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds each step may take before the ranks that did not answer are named (60)",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "nccl", "gloo"),
        default="auto",
        help="auto: NCCL when CUDA is available, else Gloo",
    )
    p.add_argument(
        "--mib", type=float, default=4.0, metavar="M", help="MiB to allocate and all-reduce (4)"
    )
    p.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        type=_ranks,
        default=None,
        metavar="N",
        help=(
            "start N ranks on this host through torch's launcher and end with one verdict "
            "(ignored under a launcher, where RANK and WORLD_SIZE are set)"
        ),
    )
    return p


def _ranks(text):
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of ranks (1 to 4096)")
    return int(text)


class Check:
    def __init__(self, args, rank, world):
        self.args, self.rank, self.world = args, rank, world
        self.host = socket.gethostname()
        self.device = self.backend = "?"  # known once torch is imported
        self.store = None  # the launcher's, once joined
        self.phase = "starting"  # the last step finished

    def who(self):
        return f"rank {self.rank} of {self.world} on {self.host} ({self.device}, {self.backend})"

    def reached(self, phase):
        self.phase = phase
        if phase == PHASES[0]:
            self.store.set(
                HOST.format(self.rank), self.host
            )  # before the step count says it is there
            self.store.add(STEPS.format(self.rank), 1)
            self.store.add(JOINED, 1)
        else:
            self.store.add(STEPS.format(self.rank), 1)

    def wait(self, what, done):
        """Polls `done()` until it holds; Failed naming the laggards after --timeout."""
        deadline = time.monotonic() + self.args.timeout
        pause = POLL_FIRST_S  # short at first, so the timings printed are the collectives'
        while not done():
            if time.monotonic() > deadline:
                raise Failed(
                    f"{self.laggards()} within {self.args.timeout:g} s, while waiting for {what}"
                )
            time.sleep(pause)
            pause = min(2 * pause, POLL_MAX_S)

    def progress(self):
        """{rank: (last step, host)} of the ranks that joined; raises if the store is gone."""
        seen = {}
        for r in range(self.world):
            steps = self.store.add(STEPS.format(r), 0)
            if steps > 0:
                seen[r] = (
                    PHASES[min(steps, len(PHASES)) - 1],
                    self.store.get(HOST.format(r)).decode(),
                )
        return seen

    def laggards(self, alive=None):
        """ "rank 1 did not answer (it never joined)" and the like: the ranks
        not in `alive`, or by default those that are steps behind this one."""
        try:
            seen = self.progress()
        except Exception as e:  # the store's own failure is the news then
            return f"the rendezvous store stopped answering ({_first_line(e)})"
        mine = PHASES.index(self.phase) if self.phase in PHASES else -1
        behind = [
            r
            for r in range(self.world)
            if (
                r not in alive
                if alive is not None
                else r not in seen or PHASES.index(seen[r][0]) < mine
            )
        ]
        if not behind:
            return "every rank got this far and is alive; the backend itself failed"
        return "; ".join(
            f"rank {r}"
            + (
                f" on {seen[r][1]} did not answer (last step: {seen[r][0]})"
                if r in seen
                else " did not answer (it never joined)"
            )
            for r in behind
        )

    def collective(self, what, work):
        self.wait(what, work.is_completed)
        try:
            work.wait()
        except RuntimeError as e:
            raise Failed(
                f"{what} failed: {_first_line(e)}; {self.laggards(self.survivors())}"
            ) from None

    def survivors(self):
        """The ranks that answer after a failed collective, a backend error or a stop;
        None if the store is gone. A rank that died as far on as this one is looks alive
        in the step counts: the living ones sign in here."""
        alive = {self.rank}
        deadline = time.monotonic() + min(self.args.timeout, SURVIVOR_WAIT_S)
        try:
            self.store.add(ALIVE.format(self.rank), 1)
            while len(alive) < self.world and time.monotonic() < deadline:
                alive = {r for r in range(self.world) if self.store.add(ALIVE.format(r), 0)}
                time.sleep(POLL_MAX_S)
        except Stopped:
            pass  # the launcher saw the dead rank too: report what is known already
        except Exception:
            return None  # the store is gone: laggards() says so
        return alive


def failure(check, error):
    """What this rank says after `error` ended its check: what it saw, then which ranks are
    gone. A rank that died after getting as far as this one (or further) looks like a live
    one in the step counts -- a rank killed in the all_reduce while this one was still in
    init_process_group's connection round -- so after a stop or a backend error the ranks
    still there sign in (survivors) and the others are named."""
    if isinstance(error, Failed):
        return str(error)  # a step timed out: the text names the laggards already
    if isinstance(error, Stopped):
        # The launcher ends every rank once one has failed: say what this one was waiting for.
        why = (
            f"stopped by {error} (the launcher ends all ranks when one fails) after step"
            f" '{check.phase}'"
        )
    else:
        why = f"{_first_line(error)} (after step '{check.phase}')"
    if check.store is None:
        return why
    return f"{why}; {check.laggards(check.survivors())}"


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def run(check):
    import torch
    import torch.distributed as dist

    args, rank, world = check.args, check.rank, check.world
    cuda = torch.cuda.is_available()
    backend = (
        args.backend
        if args.backend != "auto"
        else ("nccl" if cuda and dist.is_nccl_available() else "gloo")
    )
    device = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # Without these, a hung NCCL collective ignores the process group's timeout.
        os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    check.device, check.backend = str(device), backend
    timeout = datetime.timedelta(seconds=args.timeout)
    check.phase = "joining"
    from . import _torchrun

    _torchrun.follow_use_libuv()  # USE_LIBUV=0 for the agent's store too (torch >= 2.4)
    check.store, _, _ = next(
        dist.rendezvous("env://", rank=rank, world_size=world, timeout=timeout)
    )
    check.reached("joined")
    check.wait("every rank to join", lambda: check.store.add(JOINED, 0) >= world)
    dist.init_process_group(
        backend,
        store=dist.PrefixStore("ovf-netcheck-pg", check.store),
        rank=rank,
        world_size=world,
        timeout=timeout,
    )
    check.reached("initialised")
    numel = max(1, int(args.mib * 2**20) // 4)
    data = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=device)
    check.reached("allocated")
    started = time.perf_counter()
    check.collective("the all_reduce", dist.all_reduce(data, async_op=True))
    reduce_ms = (time.perf_counter() - started) * 1e3
    expected = world * (world + 1) / 2
    if not bool(torch.all(data == expected)):
        raise Failed(f"the all_reduce returned wrong values (expected {expected:g} everywhere)")
    check.reached("all-reduced")
    started = time.perf_counter()
    check.collective("the barrier", dist.barrier(async_op=True))
    barrier_ms = (time.perf_counter() - started) * 1e3
    check.reached("done")
    return f"all_reduce of {args.mib:g} MiB in {reduce_ms:.1f} ms, barrier in {barrier_ms:.1f} ms"


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        if args.nproc_per_node is not None:
            from ._netcheck_launch import launch

            return launch(args)
        print(
            (
                "ovf netcheck: RANK and WORLD_SIZE are not set: start the ranks with\n"
                "    python3 -m ovf.netcheck --nproc-per-node N\n"
                "or under a launcher:\n"
                "    python3 -m torch.distributed.run --nproc_per_node N -m ovf.netcheck"
            ),
            file=sys.stderr,
        )
        return 2
    check = Check(args, rank, world)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        result = run(check)
    except Exception as e:  # any is this rank's verdict (no GPU: NCCL raises ValueError)
        why = failure(check, e)
        print(
            (
                f"ovf netcheck: {check.who()}: FAILED: {why}\novf netcheck: rerun with"
                " NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL) for the backend's own"
                " account"
            ),
            flush=True,
        )
        # Tearing down a process group whose peers are gone can hang: leave at once.
        os._exit(1)
    print(f"ovf netcheck: {check.who()}: OK: {result}", flush=True)
    import torch.distributed as dist

    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
