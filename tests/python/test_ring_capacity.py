"""--ring-capacity within its range (issue 23 item 5): a ring larger than half of this
machine's memory is refused when the option is read, in one line with the memory it
would take, never with a traceback; an accepted ring costs the records written, not
its capacity (its pages are touched only when written)."""

import os
import subprocess
import textwrap

from build_paths import PYTHON, REPO, run_ovf_child

NAN_SCRIPT = os.path.join(REPO, "tests", "python", "scripts", "nan_at_batch2.py")
RECORD = 256


def _usable_memory():
    """The machine's memory, or its cgroup's limit where lower (as the runtime reads it)."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < memory:
            memory = int(text)
    return memory


MEMORY = _usable_memory()


def _largest_accepted():
    fits = 64
    while fits * 2 * RECORD <= MEMORY / 2 and fits < 2**30:
        fits *= 2
    return fits


def _refusal(records):
    pow2 = 1 << (records - 1).bit_length()
    return (
        f"would take {pow2 * RECORD / 2**30:.1f} GiB ({pow2} records of {RECORD} bytes); "
        f"at most {_largest_accepted()} records fit in half of the {MEMORY / 2**30:.1f} GiB "
        "of memory this process may use (each process's ring counts alone)"
    )


def test_a_ring_too_big_for_this_machine_is_refused_in_one_line():
    too_big = _largest_accepted() * 2
    for records in sorted({too_big, 2**27, 2**30}):
        if records < too_big:
            continue
        out = run_ovf_child(["-m", "ovf", "--ring-capacity", str(records), NAN_SCRIPT])
        assert (out.returncode, out.stdout) == (2, "")
        assert out.stderr == f"ovf: --ring-capacity={records} {_refusal(records)}\n"
        env_out = run_ovf_child(["-m", "ovf", NAN_SCRIPT], OVF_RING_CAPACITY=str(records))
        assert (env_out.returncode, env_out.stdout) == (2, "")
        assert env_out.stderr == f"ovf: OVF_RING_CAPACITY={records} {_refusal(records)}\n"


def test_a_cpp_program_hears_it_and_keeps_the_default_ring():
    too_big = _largest_accepted() * 2
    out = run_ovf_child(
        ["-c", "import ovf, torch; ovf.DebugUnderflowOverflow(torch.nn.Linear(2, 2))"],
        OVF_RING_CAPACITY=str(too_big),
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == (
        f"ovf: OVF_RING_CAPACITY={too_big}: a ring of {too_big} records {_refusal(too_big)}; "
        "the ring keeps 65536 records\n"
    )


def test_the_largest_accepted_ring_costs_only_what_is_written():
    records = _largest_accepted()
    code = textwrap.dedent(
        f"""
        import runpy, sys

        def rss_mib():
            with open("/proc/self/status") as f:
                line = next(line for line in f if line.startswith("VmRSS:"))
            return int(line.split()[1]) // 1024

        import torch
        before = rss_mib()
        sys.argv = ["ovf", "--ring-capacity", "{records}", {NAN_SCRIPT!r}]
        try:
            runpy.run_module("ovf", run_name="__main__")
        except BaseException as e:
            print("ended with", type(e).__name__)
        print("grew", rss_mib() - before, "MiB")
        """
    )
    out = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, timeout=120, env=_env()
    )
    lines = out.stdout.splitlines()
    assert "batch 1 done" in lines and "ended with NonFiniteError" in lines, out.stderr
    grew = int(lines[-1].split()[1])
    # The ring is records * 256 bytes (GiB here); torch's import and the run take
    # a few hundred MiB at most.
    assert records * RECORD > 2**30
    assert grew < 1024, lines[-1]


def _env():
    from build_paths import PACKAGE_PARENT

    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    env["PYTHONPATH"] = PACKAGE_PARENT
    return env
