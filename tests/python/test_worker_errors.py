"""ovf's exception crosses process boundaries: a NaN made in a DataLoader worker
(scripts/worker_nan.py, num_workers=2, under python3 -m ovf --ops) ends the run with the
worker's NonFiniteError and the worker's report, never a hang (the error used to fail to
pickle: "not the same object as ovf.NonFiniteError", and the main process waited forever)."""

import os
import pickle
import subprocess

import ovf
from build_paths import PACKAGE_PARENT, PYTHON, REPO

SCRIPT = os.path.join(REPO, "tests", "python", "scripts", "worker_nan.py")


def test_non_finite_error_pickles_as_itself():
    error = pickle.loads(pickle.dumps(ovf.NonFiniteError()))
    assert type(error) is ovf.NonFiniteError
    assert str(error) == (
        "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running "
        "further. Please scroll up above this traceback to see the activation values prior to "
        "this event."
    )
    assert type(pickle.loads(pickle.dumps(ovf.NonFiniteError("x")))) is ovf.NonFiniteError


def test_a_nan_made_in_a_dataloader_worker_ends_the_run_with_the_workers_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [PYTHON, "-m", "ovf", "--ops", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,  # the hang this guards against
        env=env,
        cwd=tmp_path,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "ovf.NonFiniteError: Caught NonFiniteError in DataLoader worker process" in text
    assert "ovf: why: aten::div: the divisor has 1 zero: 0/0 in 48 elements (nan)" in text
    assert "done" not in out.stdout.splitlines()
