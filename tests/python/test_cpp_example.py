"""The C++ API (runtime/cpp, ovf/ovf.h) without a debugger: the example program
examples/cpp/train goes NaN in batch 2 (aten::log in module stretch) or inf
(aten::addmm in module encoder, named by the parameters it takes), and every
on_nan mode does what it says."""

import os
import re
import resource
import signal
import subprocess
import time

import pytest
from build_paths import BUILD, PACKAGE_PARENT, PYTHON, REPO
from elftools.elf.elffile import ELFFile

TRAIN = os.path.join(BUILD, "examples", "cpp", "train")
TIMEOUT = 120

pytestmark = pytest.mark.skipif(
    not os.path.isfile(TRAIN), reason=f"{TRAIN} is not built (cmake -DOVF_BUILD_EXAMPLES=ON)"
)


def env(**extra):
    e = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    e.update(extra)
    return e


def no_core_files():
    # on_nan abort lifts the soft core limit to the hard one: keep tests from writing cores
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def train(*args, cwd=None, **extra):
    return subprocess.run(
        [TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env(**extra),
        cwd=cwd,
        preexec_fn=no_core_files,
    )


def op_lines(report):
    """The report's op listing: 'values label = op in module (role)' lines."""
    return re.findall(r"^[ 0-9a-z.+-]{17} (\S+ = \S+ in .*)$", report, re.M)


def test_raise_reports_the_producing_op_and_module_then_throws_at_next_batch():
    out = train()
    assert out.returncode == 1, out.stderr
    stdout = out.stdout
    # training up to batch 2, whose loss is printed before next_batch() throws
    assert re.findall(r"^batch (\d) loss", stdout, re.M) == ["0", "1", "2"]
    assert "\nDetected inf/nan during batch_number=2\n" in stdout
    ops = op_lines(stdout)
    assert ops[-1] == "output = aten::log in stretch (produced here)"
    assert "     nan      nan output = aten::log in stretch (produced here)\n" in stdout
    # the ops before it, named by a ModuleScope (stretch) or by the parameters they take
    assert "output = aten::mul in stretch" in ops
    assert "output = aten::addmm in encoder" in ops
    assert (
        "ovf: the first non-finite value was produced by aten::log in stretch (batch 2)\n" in stdout
    )
    # the report comes at the op, before the loss of that batch is printed
    assert stdout.index("Detected inf/nan") < stdout.index("batch 2 loss")
    assert (
        out.stderr
        == "ovf::NonFiniteError (batch 2): DebugUnderflowOverflow: inf/nan detected, aborting as "
        "there is no point running further. Please scroll up above this traceback to see the "
        "activation values prior to this event.\n"
    )


def test_an_op_without_a_module_scope_is_named_by_the_parameters_it_takes():
    out = train("overflow")
    assert out.returncode == 1, out.stderr
    assert op_lines(out.stdout)[-1] == "output = aten::addmm in encoder (produced here)"
    assert (
        "ovf: the first non-finite value was produced by aten::addmm in encoder (batch 2)\n"
        in out.stdout
    )


def test_warn_reports_once_and_training_goes_on():
    out = train(OVF_ENABLE="1", OVF_ON_NAN="warn")
    assert (out.returncode, out.stderr.splitlines()[-1]) == (
        1,
        "ovf: non-finite values were found (the report above) and on_nan warn let the run go on; "
        "exit status 1",
    ), out.stderr
    assert out.stdout.count("Detected inf/nan") == 1
    assert re.findall(r"^batch (\d) loss", out.stdout, re.M) == ["0", "1", "2", "3", "4"]
    assert (
        "ovf: the first non-finite value was produced by aten::log in stretch (batch 2)\n"
        in out.stdout
    )


def test_abort_reports_then_aborts():
    out = train(OVF_ENABLE="1", OVF_ON_NAN="abort")
    assert out.returncode == -signal.SIGABRT, (out.returncode, out.stderr)
    assert (
        "ovf: the first non-finite value was produced by aten::log in stretch (batch 2)\n"
        in out.stdout
    )
    assert "batch 2 loss" not in out.stdout  # it aborted at the op
    assert (
        "ovf: non-finite value detected; aborting so that the kernel writes a core file"
        in out.stderr
    )
    # a C++ program: the debuggers open it with the program itself, and the post-mortem
    # reader runs with the interpreter ovf was built for
    commands = out.stderr.rstrip().splitlines()[-3:]
    assert re.fullmatch(
        rf"    {re.escape(REPO)}/gdb/ovf-gdb {re.escape(TRAIN)} \S+ -ex 'ovf frames'", commands[0]
    ), commands
    assert re.fullmatch(
        rf"    {re.escape(REPO)}/lldb/ovf-lldb -c \S+ {re.escape(TRAIN)} -o 'ovf frames'",
        commands[1],
    ), commands
    assert commands[2].startswith(f"    PYTHONPATH={PACKAGE_PARENT} {PYTHON} -m ovf.postmortem "), (
        commands
    )


def test_filters_from_the_environment():
    # events only from batch 3 on: the NaN is produced in batch 2, later ops only carry it
    out = train(OVF_ENABLE="1", OVF_AFTER_BATCH="3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Detected inf/nan" not in out.stdout
    # only in module encoder: the overflow is there
    out = train("overflow", OVF_ENABLE="1", OVF_MODULE="enc*")
    assert out.returncode == 1
    assert "produced by aten::addmm in encoder (batch 2)" in out.stdout
    # without OVF_ENABLE=1 the variables are not read
    out = train(OVF_ON_NAN="warn", OVF_AFTER_BATCH="3")
    assert out.returncode == 1


@pytest.mark.parametrize(
    "name,value,message",
    [
        (
            "OVF_ON_NAN",
            "bogus",
            "ovf: OVF_ON_NAN must be one of raise, warn, abort, wait, continue; got 'bogus'",
        ),
        (
            "OVF_STOP",
            "nan,foo",
            (
                "ovf: OVF_STOP names values from nan, inf, above, below, traced, abort_after, "
                "producer_only, backward, scaler, early, cast; got 'foo'"
            ),
        ),
        (
            "OVF_AFTER_BATCH",
            "x",
            "ovf: environment variable OVF_AFTER_BATCH must be an integer; got 'x'",
        ),
        ("OVF_MAX_FRAMES", "0", "ovf: OVF_MAX_FRAMES must be an integer >= 1; got '0'"),
    ],
)
def test_bad_environment_is_one_line(name, value, message):
    out = train(OVF_ENABLE="1", **{name: value})
    assert out.returncode == 2
    assert out.stderr == message + "\n"


def state_address(pid):
    """ovf_state's address in a live process: libovf_runtime.so's load base plus the symbol."""
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
        return (
            base
            + ELFFile(f)
            .get_section_by_name(".dynsym")
            .get_symbol_by_name("ovf_state")[0]["st_value"]
        )


def test_wait_prints_attach_commands_and_waits_inside_the_op_until_released():
    proc = subprocess.Popen(
        [TRAIN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(OVF_ENABLE="1", OVF_ON_NAN="wait"),
        preexec_fn=no_core_files,
    )
    try:
        lines = []
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if not line or line.startswith("ovf: then 'ovf release'"):
                break
        text = "".join(lines)
        assert "produced by aten::log in stretch (batch 2)" in text
        assert f"ovf: process {proc.pid} is waiting for a debugger. Attach with one of:\n" in text
        # commands that work as printed: ovf's launchers by absolute path
        assert f"    {REPO}/gdb/ovf-gdb -p {proc.pid} -ex 'ovf frames'\n" in text
        assert f"    {REPO}/lldb/ovf-lldb -p {proc.pid} -o 'ovf frames'\n" in text
        time.sleep(1.0)
        assert proc.poll() is None, "the process must wait"
        # what `ovf release` does: control.wait_released (offset 256 + 52) = 1
        with open(f"/proc/{proc.pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(state_address(proc.pid) + 256 + 52)
            mem.write((1).to_bytes(4, "little"))
        out, _ = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0
        # the example's own std::cout prints a NaN as "nan" or, with torch 2.x's, "-nan"
        assert re.search(r"batch 2 loss -?nan\nbatch 3 loss -?nan\nbatch 4 loss -?nan\n", out), out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
