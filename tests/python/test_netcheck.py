"""python3 -m ovf.netcheck under python3 -m torch.distributed.run: two Gloo ranks
on CPU pass; a rank killed before it joins, killed inside the all_reduce, or
stuck before it joins is named by the rank that is left. python3 -m ovf.netcheck
--nproc-per-node 2 starts the two ranks itself, with what the installed torch
needs, and ends with one verdict line."""

import argparse
import os
import re
import socket
import stat
import sys

import pytest
from ranks_harness import BUILD, PYTHON, env, rank_lines, run, torchrun

HOST = socket.gethostname()
HINT = (
    "ovf netcheck: rerun with NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL) for the "
    "backend's own account"
)


def _wrapper(tmp_path, rank1):
    """A launcher target (--no_python) that runs the check on rank 0 and `rank1` on rank 1."""
    path = tmp_path / "rank.sh"
    path.write_text(
        "#!/bin/sh\n"
        f"if [ \"$LOCAL_RANK\" = 1 ]; then {rank1}; fi\n"
        f"exec {PYTHON} -m ovf.netcheck \"$@\"\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_two_gloo_ranks_pass(tmp_path):
    out = run(torchrun(2, tmp_path / "logs", "-m", "ovf.netcheck", "--timeout", "60"), env=env())
    assert out.returncode == 0, out.stdout
    for rank in (0, 1):
        checks = [line for line in rank_lines(out.stdout, rank) if line.startswith("ovf netcheck:")]
        assert len(checks) == 1, out.stdout
        assert re.fullmatch(
            rf"ovf netcheck: rank {rank} of 2 on {re.escape(HOST)} \(cpu, gloo\): OK: "
            r"all_reduce of 4 MiB in \d+\.\d ms, barrier in \d+\.\d ms",
            checks[0],
        ), checks


def test_a_rank_killed_before_it_joins_is_named(tmp_path):
    # The launcher sees rank 1 die and ends rank 0 (SIGTERM) long before the 60 s timeout.
    out = run(
        torchrun(
            2,
            tmp_path / "logs",
            "--no_python",
            _wrapper(tmp_path, "kill -KILL $$"),
            "--timeout",
            "60",
        ),
        env=env(),
    )
    assert out.returncode != 0
    assert rank_lines(out.stdout, 0) == [
        (
            f"ovf netcheck: rank 0 of 2 on {HOST} (cpu, gloo): FAILED: stopped by SIGTERM (the"
            " launcher ends all ranks when one fails) after step 'joined'; rank 1 did not answer"
            " (it never joined)"
        ),
        HINT,
    ], out.stdout
    assert rank_lines(out.stdout, 1) == []


def test_a_rank_killed_in_the_all_reduce_is_named(tmp_path):
    # Rank 1 joins, waits until rank 0 has allocated too (else, under load, rank 0 can
    # still be in init_process_group's connection round when rank 1 dies, and fail there),
    # then dies the moment it enters the all_reduce.
    (tmp_path / "die.py").write_text(
        "import os, signal, sys, time\nimport torch.distributed as dist\n"
        "from ovf import netcheck\n"
        "reached = netcheck.Check.reached\n"
        "def wait_for_rank_0(check, phase):\n"
        "    reached(check, phase)\n"
        "    while phase == 'allocated' and check.store.add(netcheck.STEPS.format(0), 0) < 3:\n"
        "        time.sleep(0.01)\n"
        "netcheck.Check.reached = wait_for_rank_0\n"
        "dist.all_reduce = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)\n"
        "sys.exit(netcheck.main())\n"
    )
    rank1 = f'exec {PYTHON} {tmp_path / "die.py"} "$@"'
    out = run(
        torchrun(2, tmp_path / "logs", "--no_python", _wrapper(tmp_path, rank1), "--timeout", "60"),
        env=env(),
    )
    assert out.returncode != 0
    lines = rank_lines(out.stdout, 0)
    assert len(lines) == 2 and lines[1] == HINT, out.stdout
    assert re.fullmatch(
        rf"ovf netcheck: rank 0 of 2 on {re.escape(HOST)} \(cpu, gloo\): FAILED: the all_reduce "
        rf"failed: .*(Connection closed by peer|Connection reset by peer).*; rank 1 on "
        rf"{re.escape(HOST)} did not answer \(last step: allocated\)",
        lines[0],
    ), lines


def _check_beside_rank_1(rank1_steps, rank1_alive):
    """Rank 0's check at step 'joined' in a world of 2, with a real (in-process) store in
    which rank 1 got `rank1_steps` steps far and, if `rank1_alive`, signed in as alive."""
    import torch.distributed as dist
    from ovf import netcheck

    check = netcheck.Check(argparse.Namespace(timeout=60.0), 0, 2)
    check.store, check.phase = dist.HashStore(), "joined"
    check.store.set(netcheck.HOST.format(1), "node1")
    check.store.add(netcheck.STEPS.format(1), rank1_steps)
    if rank1_alive:
        check.store.add(netcheck.ALIVE.format(1), 1)
    return check


GLOO_CLOSED = "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:40047"


def test_a_rank_dead_further_on_than_this_one_is_named_after_a_backend_error():
    # What CI's load once made: rank 1 finished init_process_group, allocated and was killed
    # in the all_reduce while rank 0 was still connecting; the step counts alone said
    # "every rank got this far and is alive".
    from ovf.netcheck import failure

    said = failure(_check_beside_rank_1(3, False), RuntimeError(GLOO_CLOSED))
    assert said == (
        f"{GLOO_CLOSED} (after step 'joined'); rank 1 on node1 did not answer (last step: "
        "allocated)"
    )
    said = failure(_check_beside_rank_1(3, True), RuntimeError(GLOO_CLOSED))
    assert said == (
        f"{GLOO_CLOSED} (after step 'joined'); every rank got this far and is alive; the "
        "backend itself failed"
    )


def test_a_rank_that_never_joins_is_named_after_the_timeout(tmp_path):
    out = run(
        torchrun(
            2,
            tmp_path / "logs",
            "--no_python",
            _wrapper(tmp_path, "exec sleep 120"),
            "--timeout",
            "3",
        ),
        env=env(),
        timeout=100,
    )
    assert out.returncode != 0
    assert rank_lines(out.stdout, 0) == [
        (
            f"ovf netcheck: rank 0 of 2 on {HOST} (cpu, gloo): FAILED: rank 1 did not answer (it"
            " never joined) within 3 s, while waiting for every rank to join"
        ),
        HINT,
    ], out.stdout


def test_without_a_launcher_it_says_how_to_start_it():
    out = run([PYTHON, "-m", "ovf.netcheck"], env=env(), timeout=60, cwd=BUILD)
    assert out.returncode == 2
    assert (
        out.stdout == "ovf netcheck: RANK and WORLD_SIZE are not set: start the ranks with\n"
        "    python3 -m ovf.netcheck --nproc-per-node N\n"
        "or under a launcher:\n"
        "    python3 -m torch.distributed.run --nproc_per_node N -m ovf.netcheck\n"
    )


def _bare_env():
    """What a user's shell has: no USE_LIBUV, no GLOO_SOCKET_IFNAME; the launcher
    mode must find out what the installed torch and this host need."""
    out = env()
    del out["USE_LIBUV"], out["GLOO_SOCKET_IFNAME"]
    return out


def test_one_command_starts_two_gloo_ranks_and_gives_one_verdict(tmp_path):
    out = run(
        [PYTHON, "-m", "ovf.netcheck", "--nproc-per-node", "2", "--backend", "gloo"],
        env=_bare_env(),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout
    lines = out.stdout.splitlines()
    notes = []
    try:
        socket.getaddrinfo(HOST, None)
    except OSError:  # the trixie root has no entry for the host's name
        notes = [
            f"ovf netcheck: the host name {HOST!r} does not resolve: Gloo uses the loopback "
            "interface (GLOO_SOCKET_IFNAME=lo)"
        ]
    assert lines[: len(notes)] == notes, out.stdout
    lines = lines[len(notes) :]
    assert len(lines) == 3, out.stdout
    for rank in (0, 1):
        assert re.fullmatch(
            rf"ovf netcheck: rank {rank} of 2 on {re.escape(HOST)} \(cpu, gloo\): OK: "
            r"all_reduce of 4 MiB in \d+\.\d ms, barrier in \d+\.\d ms",
            lines[rank],
        ), lines
    assert lines[2] == (
        f"ovf netcheck: OK: all 2 ranks on {HOST} joined, all-reduced and met at the barrier"
    )
    assert os.listdir(tmp_path) == []  # the launcher's logs went to a directory of its own


def test_one_command_names_the_ranks_that_failed(tmp_path):
    import torch
    import torch.distributed as dist

    if torch.cuda.is_available() and dist.is_nccl_available():
        pytest.skip("NCCL works here: no backend that is sure to fail")
    out = run(
        [
            PYTHON,
            "-m",
            "ovf.netcheck",
            "--nproc-per-node",
            "2",
            "--backend",
            "nccl",
            "--timeout",
            "20",
        ],
        env=env(),
        cwd=tmp_path,
    )
    assert out.returncode == 1, out.stdout
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout
    for rank in (0, 1):
        assert re.fullmatch(
            rf"ovf netcheck: rank {rank} of 2 on {re.escape(HOST)} \(cpu, nccl\): FAILED: .+",
            lines[rank],
        ), lines
    assert lines[2:] == [
        HINT,
        "ovf netcheck: FAILED: 0 of 2 ranks passed; failed: ranks 0, 1; the launcher exited "
        "with status 1",
    ]


def _launch_args(**kw):
    values = dict(nproc_per_node=3, backend="gloo", timeout=7.5, mib=0.5)
    values.update(kw)
    return argparse.Namespace(**values)


def test_the_launch_passes_what_the_installed_torch_needs():
    from ovf import _netcheck_launch as netcheck  # the build's (conftest.py)

    argv = netcheck.launcher_argv(_launch_args(), "/logs", 29123)
    assert argv == [
        sys.executable,
        "-m",
        "ovf._torchrun",
        "--nnodes",
        "1",
        "--nproc_per_node",
        "3",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        "29123",
        "--log_dir",
        "/logs",
        "--redirects",
        "1",
        "--tee",
        "1",
        "-m",
        "ovf.netcheck",
        "--backend",
        "gloo",
        "--timeout",
        "7.5",
        "--mib",
        "0.5",
    ]
    package_parent = os.path.dirname(os.path.dirname(netcheck.__file__))
    environment, notes = netcheck.launcher_env({"PYTHONPATH": "/mine", "X": "1"}, host="localhost")
    assert environment == {
        "PYTHONPATH": package_parent + os.pathsep + "/mine",
        "X": "1",
        "USE_LIBUV": "0",
    }
    assert notes == []
    # What the caller chose stays; a host name that does not resolve puts Gloo on lo.
    environment, notes = netcheck.launcher_env({"USE_LIBUV": "1"}, host="no-such-host.invalid")
    assert environment == {
        "PYTHONPATH": package_parent,
        "USE_LIBUV": "1",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    assert notes == [
        "ovf netcheck: the host name 'no-such-host.invalid' does not resolve: Gloo uses the "
        "loopback interface (GLOO_SOCKET_IFNAME=lo)"
    ]
    environment, _ = netcheck.launcher_env(
        {"GLOO_SOCKET_IFNAME": "eth1"}, host="no-such-host.invalid"
    )
    assert environment["GLOO_SOCKET_IFNAME"] == "eth1"
