"""ovf as `pip install .` installs it (tools/test.sh runs the e2e tests with
OVF_TEST_INSTALLED=1 in a fresh venv holding the wheel): the console scripts, the init
lines, the hints a process prints, `ovf status` on a CUDA torch without a GPU, and a C++
program built with find_package(ovf) from the installed package."""

import os
import shutil
import subprocess

import pytest
from build_paths import INSTALLED
from harness import (
    GDB_LAUNCHER,
    LLDB_LAUNCHER,
    PACKAGE,
    PACKAGE_PARENT,
    PYTHON,
    SCRIPT,
    TOP,
    clean_env,
    run_bounded,
    stop_summary,
)

pytestmark = pytest.mark.skipif(
    not INSTALLED, reason="tests the pip-installed ovf (OVF_TEST_INSTALLED=1, tools/test.sh)"
)
VENV_BIN = os.path.dirname(PYTHON)
CUDA_BUILD = (
    subprocess.run(
        [PYTHON, "-c", "import torch, sys; sys.exit(0 if torch.version.cuda else 1)"],
        timeout=120,
    ).returncode
    == 0
)


def test_the_package_is_the_wheels_not_the_build_trees():
    assert PACKAGE_PARENT.endswith("site-packages"), PACKAGE_PARENT
    assert not PACKAGE_PARENT.startswith(os.path.join(TOP, "build", "python"))
    for name in (
        "libovf_runtime.so",
        "libovf_torch.so",
        "debuggers/gdb/ovf-gdb.py",
        "debuggers/lldb/ovf_lldb.py",
        "include/ovf/ring.h",
        "share/cmake/ovf/ovfConfig.cmake",
    ):
        assert os.path.exists(os.path.join(PACKAGE, name)), name
    for name in ("ovf_ring", "ovf_plugin"):
        assert os.path.isdir(os.path.join(PACKAGE_PARENT, name)), name


@pytest.mark.parametrize("launcher", [GDB_LAUNCHER, LLDB_LAUNCHER])
def test_console_script_with_python_from_path_stops_at_the_first_nan(launcher):
    """What a user types in an activated venv: `ovf-gdb --args python train.py`."""
    env = clean_env(PATH=f"{VENV_BIN}:/usr/bin:/bin")
    env.pop("OVF_PACKAGE_DIR")  # nothing but the installed package
    program = ["python", SCRIPT, "--inf-at", "blocks.1.amp:2"]
    if launcher.endswith("gdb"):
        argv = [
            launcher,
            "-batch",
            "-nx",
            "-ex",
            "ovf break-on-nan",
            "-ex",
            "run",
            "-ex",
            "kill",
            "--args",
            *program,
        ]
    else:
        argv = [
            launcher,
            "--no-lldbinit",
            "-b",
            "-o",
            "ovf break-on-nan",
            "-o",
            "run",
            "-o",
            "kill",
            "--",
            *program,
        ]
    out = run_bounded(argv, env=env, cwd=TOP)
    assert stop_summary(out)[:3] == ("first non-finite value (inf)", 2, "blocks.1.amp"), out


def test_print_init_names_the_installed_front_ends():
    gdb = subprocess.run([GDB_LAUNCHER, "--print-init"], capture_output=True, text=True, timeout=60)
    lldb = subprocess.run(
        [LLDB_LAUNCHER, "--print-init"], capture_output=True, text=True, timeout=60
    )
    assert gdb.stdout == f"source {PACKAGE}/debuggers/gdb/ovf-gdb.py\n"
    assert lldb.stdout == f"command script import {PACKAGE}/debuggers/lldb/ovf_lldb.py\n"


def test_wait_mode_names_the_venvs_console_script():
    """The attach command a waiting process prints works as printed: the venv's ovf-gdb."""
    out = run_bounded(
        [
            PYTHON,
            "-m",
            "ovf",
            "--on-nan",
            "wait",
            "--wait-timeout",
            "1",
            SCRIPT,
            "--inf-at",
            "blocks.1.amp:2",
        ],
        env=clean_env(),
        cwd=TOP,
    )
    assert f"    {GDB_LAUNCHER} -p " in out, out
    assert f"    {LLDB_LAUNCHER} -p " in out, out


@pytest.mark.skipif(not CUDA_BUILD, reason="this torch is a CPU build")
def test_status_says_the_cuda_backend_is_built_and_there_is_no_gpu(debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf status", "kill"],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.1.amp:2"],
    )
    assert (
        "device statistics: ovf's CUDA backend is built; this process has no GPU "
        "(torch sees no CUDA device)"
    ) in out.splitlines(), out


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_a_cpp_program_finds_the_installed_ovf_with_find_package(tmp_path):
    prefix = subprocess.run(
        [PYTHON, "-c", "import ovf; print(ovf.cmake_prefix_path)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    build = tmp_path / "build"
    subprocess.run(
        [
            "cmake",
            "-S",
            os.path.join(TOP, "examples", "cpp"),
            "-B",
            str(build),
            "-G",
            "Ninja",
            f"-DCMAKE_PREFIX_PATH={prefix}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    built = subprocess.run(
        ["cmake", "--build", str(build)], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout[-3000:]
    linked = subprocess.run(
        ["ldd", str(build / "train")], capture_output=True, text=True, timeout=60
    ).stdout
    assert f"{PACKAGE}/libovf_torch.so" in linked, linked
    ran = run_bounded([str(build / "train")], env=clean_env(), cwd=str(tmp_path))
    assert "ovf: the first non-finite value was produced by aten::log in stretch (batch 2)" in ran
