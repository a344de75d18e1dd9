"""python3 -m ovf, the sitecustomize bootstrap and the four event modes, each in
a real child process running an unmodified script."""

import os
import re
import signal
import subprocess
import time

import pytest
from build_paths import PACKAGE_PARENT, PYTHON, REPO, WENT_ON
from elftools.elf.elffile import ELFFile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "nan_at_batch2.py")
BOOTSTRAP = os.path.join(PACKAGE_PARENT, "ovf", "_bootstrap")


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def run(args, timeout=60, **env):
    return subprocess.run(
        [PYTHON] + args,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(**env),
        cwd=env.pop("cwd", None) if "cwd" in env else None,
    )


def report_tail(stdout):
    """The frame lines of the last frame of the report."""
    lines = stdout.splitlines()
    start = lines.index("Detected inf/nan during batch_number=2")
    return lines[start : start + 3], lines[-8:]


def test_python_m_ovf_raises_at_the_first_nan_like_the_reference():
    p = run(["-m", "ovf", SCRIPT], PYTHONPATH=PACKAGE_PARENT)
    assert p.returncode == 1
    head, _ = report_tail(p.stdout)
    assert head == [
        "Detected inf/nan during batch_number=2",
        "Last 8 forward frames:",
        "abs min  abs max  metadata",
    ]
    assert "batch 1 done\n" in p.stdout and "batch 2 done" not in p.stdout
    assert p.stdout.startswith("batch 0 done\nbatch 1 done\noutput has nans\n")
    # the last frame: Log's input finite, output NaN; then what the replay found
    lines = p.stdout.rstrip("\n").splitlines()
    replayed = next(i for i, line in enumerate(lines) if line.startswith("ovf: replayed "))
    assert [line for line in lines[:replayed] if line][-3:] == [
        " " * 18 + "1 Log",
        "2.97e+01 2.97e+01 input[0]",
        "     nan      nan output",
    ]
    assert re.fullmatch(
        r"ovf: replayed the forward of Sequential with its ops observed \(\d+\.\d\d s\)",
        lines[replayed],
    )
    assert lines[replayed + 1 :] == [
        "ovf: the first non-finite value was produced by aten::log in 1 at nan_at_batch2.py:12"
        " in forward (batch 2)",
        "ovf: why: aten::log of 6 negative values (nan)",
        "ovf: verdict: non-finite in float64 too (6 nan and 0 inf): the math itself on these"
        " inputs, not this op's precision",
    ]
    assert (
        p.stderr.rstrip()
        .splitlines()[-1]
        .startswith("ovf.NonFiniteError: DebugUnderflowOverflow: inf/nan detected")
    )


def test_warn_mode_reports_once_and_training_goes_on_to_exit_status_1():
    p = run(["-m", "ovf", "--on-nan", "warn", SCRIPT], PYTHONPATH=PACKAGE_PARENT)
    assert (p.returncode, p.stderr.splitlines()[-1]) == (1, WENT_ON), p.stderr
    assert p.stdout.count("Detected inf/nan") == 1
    assert p.stdout.rstrip().endswith("training finished")


def test_bootstrap_turns_ovf_on_when_torch_is_imported_and_chains_sitecustomize():
    probe = os.path.join(HERE, "sitecustomize_probe")
    p = run([SCRIPT], PYTHONPATH=f"{BOOTSTRAP}:{probe}", OVF_ENABLE="1", OVF_MAX_FRAMES="2")
    assert p.returncode == 1
    assert p.stdout.startswith("user sitecustomize ran\n")
    assert "Detected inf/nan during batch_number=2\nLast 2 forward frames:\n" in p.stdout


def test_bootstrap_is_inert_without_ovf_enable():
    p = run([SCRIPT], PYTHONPATH=BOOTSTRAP)
    assert p.returncode == 0 and "Detected" not in p.stdout and "ovf" not in p.stderr


def test_bootstrap_reports_bad_options_in_one_line_and_leaves_the_script_alone():
    p = run([SCRIPT], PYTHONPATH=BOOTSTRAP, OVF_ENABLE="1", OVF_MAX_FRAMES="many")
    assert p.returncode == 0
    assert (
        p.stderr.strip()
        == "ovf: not enabled: ovf: environment variable OVF_MAX_FRAMES must be an integer; "
        "got 'many'"
    )


# `gdb --args python -m ovf train.py` after `ovf break-on-nan --ops`: the debugger's
# bootstrap is first on PYTHONPATH with the options it armed (OVF_ENABLE=1, OVF_*).
LOG_OP = (
    "ovf: the first non-finite value was produced by aten::log in 1 at nan_at_batch2.py:12 "
    "in forward (batch 2)"
)


def test_python_m_ovf_in_a_session_keeps_the_options_it_was_not_given():
    # Before: the bootstrap enabled ovf while -m ovf was importing torch ("ovf: not
    # enabled: partially initialized module 'ovf._options'"), and -m ovf's defaults
    # replaced the session's: ops went unobserved, 8 frames instead of 2.
    p = run(
        ["-m", "ovf", SCRIPT],
        PYTHONPATH=BOOTSTRAP,
        OVF_ENABLE="1",
        OVF_OBSERVE="ops",
        OVF_MAX_FRAMES="2",
    )
    assert p.returncode == 1, p.stderr
    assert "not enabled" not in p.stderr, p.stderr
    assert "\nLast 2 forward frames:\n" in p.stdout, p.stdout
    assert LOG_OP in p.stdout.splitlines() + p.stderr.splitlines(), (p.stdout, p.stderr)


def test_python_m_ovf_in_a_session_takes_the_options_it_was_given():
    # typed options win even where they are -m ovf's defaults (--on-nan raise); the op
    # levels typed are added to the session's (ops from it, backward typed)
    p = run(
        ["-m", "ovf", "--on-nan", "raise", "--max-frames", "3", "--backward", SCRIPT],
        PYTHONPATH=BOOTSTRAP,
        OVF_ENABLE="1",
        OVF_ON_NAN="continue",
        OVF_OBSERVE="ops",
        OVF_MAX_FRAMES="2",
    )
    assert p.returncode == 1, p.stderr
    assert "\nLast 3 forward frames:\n" in p.stdout, p.stdout
    assert LOG_OP in p.stdout.splitlines() + p.stderr.splitlines(), (p.stdout, p.stderr)
    assert p.stderr.rstrip().splitlines()[-1].startswith("ovf.NonFiniteError: "), p.stderr
    # the session's own mode where none was typed: a debugger's continue (no raise, no report)
    p = run(["-m", "ovf", SCRIPT], PYTHONPATH=BOOTSTRAP, OVF_ENABLE="1", OVF_ON_NAN="continue")
    assert (p.returncode, p.stdout.rstrip().splitlines()[-1]) == (0, "training finished"), p


def test_cli_rejects_bad_arguments_in_one_line():
    p = run(["-m", "ovf", "--on-nan", "explode", SCRIPT], PYTHONPATH=PACKAGE_PARENT)
    assert p.returncode == 2 and "invalid choice: 'explode'" in p.stderr
    p = run(["-m", "ovf", "missing.py"], PYTHONPATH=PACKAGE_PARENT)
    assert (
        p.returncode == 2
        and p.stderr.strip() == "ovf: cannot open script 'missing.py': no such file"
    )
    p = run(["-m", "ovf", "--max-frames", "0", SCRIPT], PYTHONPATH=PACKAGE_PARENT)
    assert p.returncode == 2
    assert p.stderr.strip() == "ovf: --max-frames must be an integer from 1 to 4294967295; got 0"


def test_abort_mode_dumps_a_core_with_the_ring(tmp_path):
    p = subprocess.run(
        [PYTHON, "-m", "ovf", "--on-nan", "abort", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=child_env(PYTHONPATH=PACKAGE_PARENT),
    )
    assert p.returncode == -signal.SIGABRT
    assert "Detected inf/nan during batch_number=2" in p.stdout
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    if pattern.startswith("|") or "/" in pattern or "%" in pattern:
        pytest.skip(f"kernel core_pattern {pattern!r} does not write into the working directory")
    cores = [f for f in os.listdir(tmp_path) if f.startswith("core")]
    assert cores, "no core file written"
    # the message names the file the kernel wrote and three commands that open it as printed
    core, python = tmp_path / cores[0], os.path.realpath(PYTHON)
    assert p.stderr.rstrip().splitlines()[-4:] == [
        "ovf: non-finite value detected; aborting so that the kernel writes a core file "
        f"({core}); open it with one of:",
        f"    {REPO}/gdb/ovf-gdb {python} {core} -ex 'ovf frames'",
        f"    {REPO}/lldb/ovf-lldb -c {core} {python} -o 'ovf frames'",
        f"    PYTHONPATH={PACKAGE_PARENT} {python} -m ovf.postmortem {core}",
    ], p.stderr
    with open(tmp_path / cores[0], "rb") as f:
        data = f.read()
    assert (0x474E49522D46564F).to_bytes(8, "little") in data  # the ring's magic


def state_address(pid):
    """ovf_state's address in a live process: its library's load base from
    /proc/PID/maps plus the symbol's value from the ELF file."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if (
                len(fields) >= 6
                and fields[5].endswith("libovf_runtime.so")
                and int(fields[2], 16) == 0
            ):
                base, path = int(fields[0].split("-")[0], 16), fields[5]
                break
        else:
            raise AssertionError("libovf_runtime.so is not mapped")
    with open(path, "rb") as f:
        symbol = ELFFile(f).get_section_by_name(".dynsym").get_symbol_by_name("ovf_state")[0]
        return base + symbol["st_value"]


def test_wait_mode_prints_attach_commands_and_waits_for_release():
    proc = subprocess.Popen(
        [PYTHON, "-m", "ovf", "--on-nan", "wait", SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(PYTHONPATH=PACKAGE_PARENT),
    )
    try:
        lines = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("ovf: then 'ovf release'"):
                break
        text = "".join(lines)
        assert f"ovf: process {proc.pid} is waiting for a debugger. Attach with one of:\n" in text
        # commands that work as printed: ovf's launchers by absolute path
        assert f"    {REPO}/gdb/ovf-gdb -p {proc.pid} -ex 'ovf frames'\n" in text
        assert f"    {REPO}/lldb/ovf-lldb -p {proc.pid} -o 'ovf frames'\n" in text
        time.sleep(1.0)
        assert proc.poll() is None, "the process must wait"
        # What `ovf release` does: write control.wait_released (offset 256 + 52).
        with open(f"/proc/{proc.pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(state_address(proc.pid) + 256 + 52)
            mem.write((1).to_bytes(4, "little"))
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert out.rstrip().endswith("training finished")
    finally:
        if proc.poll() is None:
            proc.kill()
