"""`ovf-gdb`: loads ovf and runs a python3 shim's real interpreter."""

import os
import subprocess

from gdb_harness import PYTHON, SCRIPT, TIMEOUT, TOP, clean_env, requires_gdb, stop_summary

pytestmark = requires_gdb


def test_launcher_resolves_a_shim_and_loads_ovf(tmp_path):
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\nexec {PYTHON} "$@"\n')  # what pyenv and friends put on PATH
    shim.chmod(0o755)
    env = clean_env(PATH=f"{tmp_path}:/usr/bin:/bin")
    out = subprocess.run([os.path.join(TOP, "gdb", "ovf-gdb"), "-batch", "-nx", "-ex", "ovf break-on-nan", "-ex", "run",
                          "-ex", "kill", "--args", "python3", SCRIPT, "--inf-at", "blocks.1.amp:2"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT, env=env)
    assert f"ovf-gdb: python3 is a script ({shim}); debugging {PYTHON}" in out.stdout
    assert stop_summary(out.stdout)[1:3] == (2, "blocks.1.amp")
