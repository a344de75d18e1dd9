"""python3 -m ovf.netcheck under python3 -m torch.distributed.run: two Gloo ranks
on CPU pass; a rank killed before it joins, killed inside the all_reduce, or
stuck before it joins is named by the rank that is left."""

import re
import socket
import stat

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
    # Rank 1 joins, then dies the moment it enters the all_reduce.
    (tmp_path / "die.py").write_text(
        "import os, signal, sys\nimport torch.distributed as dist\n"
        "dist.all_reduce = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from ovf import netcheck\nsys.exit(netcheck.main())\n"
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
        out.stdout
        == "ovf netcheck: RANK and WORLD_SIZE are not set: start it with\n"
        "    python3 -m torch.distributed.run --nproc_per_node N -m ovf.netcheck\n"
    )
