"""A real transformers Trainer on a tiny config-built GPT-2 (scripts/hf_trainer.py) that goes
non-finite at step 2, against transformers' own DebugUnderflowOverflow
(TrainingArguments(debug="underflow_overflow")) run in the same test: ovf's one-line
callback, `python3 -m ovf` around the unmodified script, gdb's and LLDB's `ovf break-on-nan`,
and the script started by torchrun and by accelerate all name the batch and module the
reference names, and never stop the same run without the fault; `python3 -m ovf` names the
batch's dataset indices as the dataset was asked for them."""

import os
import re
import subprocess

import pytest

transformers = pytest.importorskip(
    "transformers",
    reason="transformers is not installed here (the trixie leg): the main leg runs these",
)
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded, stop_summary  # noqa: E402
from ranks_harness import rank_lines, torchrun  # noqa: E402

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "hf_trainer.py")
QUIET = dict(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error")


def run_script(*argv, prefix=(), timeout=300, **env):
    return run_bounded(
        [*prefix, SCRIPT, *argv],
        timeout=timeout,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT, **QUIET, **env),
        cwd=TOP,
    )


def verdict(out):
    """(batch, last frame's header) of a DebugUnderflowOverflow report."""
    batch = re.search(r"^Detected inf/nan during batch_number=(\d+)$", out, re.M)
    assert batch, out
    report = out[batch.end() :].split("\n\n\n\n")[0]
    headers = re.findall(r"^ {17} (\S+ \S+)$", report, re.M)
    return int(batch.group(1)), headers[-1]


@pytest.fixture(scope="module")
def reference():
    out = run_script("--mode", "reference", prefix=[PYTHON])
    assert "ValueError: DebugUnderflowOverflow: inf/nan detected" in out, out
    return verdict(out)


def test_the_reference_names_the_final_layer_norm_at_step_2(reference):
    assert reference == (2, "transformer.ln_f LayerNorm")


def test_the_callback_stops_where_the_reference_stops(reference):
    out = run_script("--mode", "callback", prefix=[PYTHON])
    assert "ovf.NonFiniteError: DebugUnderflowOverflow: inf/nan detected" in out, out
    assert verdict(out) == reference
    assert "training finished" not in out


def test_python_m_ovf_around_the_unmodified_script_stops_there_too(reference):
    out = run_script(prefix=[PYTHON, "-m", "ovf"])
    assert verdict(out) == reference
    assert "training finished" not in out


def test_python_m_ovf_names_the_dataset_indices_of_the_trainers_batch(reference):
    """The Trainer's loader is Accelerate's, which fetches one batch ahead of the one it
    hands out: ovf names the samples of the batch the reference stops in, as the dataset
    was asked for them (four a batch, in order: the oracle)."""
    out = run_script("--print-indices", prefix=[PYTHON, "-m", "ovf"])
    batch = reference[0]
    fetched = [int(i) for i in re.findall(r"^fetched (\d+)$", out, re.M)]
    assert len(fetched) >= 4 * (batch + 1), out
    listed = ", ".join(map(str, fetched[4 * batch : 4 * batch + 4]))
    assert f"\novf: batch {batch} held dataset indices {listed} (Tokens, 4 of 4)\n" in out, out


def test_a_healthy_run_trains_to_the_end(reference):
    out = run_script("--blow-up-at", "99", prefix=[PYTHON, "-m", "ovf"])
    assert out.rstrip().endswith("training finished"), out
    assert "Detected inf/nan" not in out


def test_the_debuggers_stop_where_the_reference_stops(reference, debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "kill"],
        program=[PYTHON, SCRIPT],
        env=clean_env(PYTHONPATH=PACKAGE_PARENT, **QUIET),
        timeout=300,
    )
    _, batch, module, cls = stop_summary(out)
    assert (batch, f"{module} {cls}") == reference
    assert debugger.hits(out) == 1


def test_torchrun_ranks_stop_where_the_reference_stops(reference, tmp_path):
    out = run_bounded(
        torchrun(2, tmp_path / "logs", "-m", "ovf", SCRIPT),
        timeout=300,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT, **QUIET, GLOO_SOCKET_IFNAME="lo"),
        cwd=TOP,
    )
    for rank in (0, 1):
        text = "\n".join(rank_lines(out, rank))
        assert verdict(text) == reference, out


def _has_accelerate():
    return subprocess.run([PYTHON, "-c", "import accelerate"], timeout=120).returncode == 0


@pytest.mark.skipif(not _has_accelerate(), reason="accelerate is not installed")
def test_accelerate_launch_stops_where_the_reference_stops(reference):
    out = run_script(
        prefix=[
            PYTHON,
            "-m",
            "accelerate.commands.launch",
            "--cpu",
            "--num_processes",
            "1",
            "-m",
            "ovf",
        ],
    )
    assert verdict(out) == reference, out
