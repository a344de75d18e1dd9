"""`ovf-gdb` and `ovf-lldb`: load ovf and run a python3 shim's real interpreter; an LLDB whose
Python module needs PYTHONPATH (Debian's lldb 14) keeps it out of the program's environment."""

import os
import re
import shutil
import subprocess

import pytest
from harness import LLDB_LAUNCHER, PYTHON, SCRIPT, clean_env, run_bounded, stop_summary


def test_launcher_resolves_a_shim_and_loads_ovf(debugger, tmp_path):
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\nexec {PYTHON} "$@"\n')  # what pyenv and friends put on PATH
    shim.chmod(0o755)
    env = clean_env(PATH=f"{tmp_path}:/usr/bin:/bin")
    out = run_bounded(
        debugger.launcher(
            ["ovf break-on-nan", "run", "kill"], ["python3", SCRIPT, "--inf-at", "blocks.1.amp:2"]
        ),
        env=env,
    )
    assert f"ovf-{debugger.name}: python3 is a script ({shim}); debugging {PYTHON}" in out
    assert stop_summary(out)[1:3] == (2, "blocks.1.amp")


def _installed_old_lldb():
    """An installed LLDB older than 15, or None."""
    for name in ("lldb-14", "lldb-13", "lldb-12", "lldb"):
        path = shutil.which(name)
        if path is None:
            continue
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
        m = re.search(r"lldb version (\d+)", version)
        if m and int(m.group(1)) < 15:
            return path
    return None


def _stand_in(tmp_path):
    """lldb-19 behind a script that says it is LLDB 14 and, like Debian's, refuses to start
    unless PYTHONPATH has its Python directory: what ovf-lldb does about it is what is tested."""
    pydir = tmp_path / "lldb14-python"
    pydir.mkdir()
    script = tmp_path / "lldb14"
    script.write_text(
        f"""#!/bin/sh
case "$1" in
    --version) echo "lldb version 14.0.6"; exit 0 ;;
    -P|--python-path) echo "{pydir}"; exit 0 ;;
esac
case ":${{PYTHONPATH:-}}:" in
    *":{pydir}:"*) exec {shutil.which("lldb-19")} "$@" ;;
esac
echo "ModuleNotFoundError: No module named 'lldb'" >&2
exit 1
"""
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("which", ["installed", "stand-in"])
@pytest.mark.parametrize("user_pythonpath", [None, "/opt/user/lib"])
def test_an_lldb_that_needs_pythonpath_does_not_pass_it_on(tmp_path, which, user_pythonpath):
    if which == "installed":
        lldb = _installed_old_lldb()
        if lldb is None:
            pytest.skip(
                "no LLDB older than 15 is installed (Debian's lldb 14 conflicts with lldb-19)"
            )
    else:
        if shutil.which("lldb-19") is None:
            pytest.skip("lldb-19 is not installed")
        lldb = _stand_in(tmp_path)
    probe = "import os; print('PYTHONPATH=' + repr(os.environ.get('PYTHONPATH')))"
    env = clean_env(OVF_LLDB=lldb, **({"PYTHONPATH": user_pythonpath} if user_pythonpath else {}))
    launcher = [LLDB_LAUNCHER, "--no-lldbinit", "-b"]
    out = run_bounded([*launcher, "-o", "run", "--", PYTHON, "-c", probe], env=env)
    assert f"PYTHONPATH={user_pythonpath!r}" in out, out
    # Armed, the program's PYTHONPATH is ovf's bootstrap, then the user's: still not LLDB's.
    out = run_bounded(
        [*launcher, "-o", "ovf break-on-nan", "-o", "run", "--", PYTHON, "-c", probe], env=env
    )
    bootstrap = os.path.join(os.path.realpath(env["OVF_PACKAGE_DIR"]), "_bootstrap")
    expected = bootstrap + (os.pathsep + user_pythonpath if user_pythonpath else "")
    assert f"PYTHONPATH={expected!r}" in out, out
