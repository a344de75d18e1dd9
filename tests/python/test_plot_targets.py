"""A picture never costs an input (issue 23 item 1): `python3 -m ovf.postmortem CORE
--plot FILE` where FILE is a symlink or hard link to the core, the core itself under a
.png name, or any file that is not a picture, is refused in one line and the file is
left byte for byte as it was; a picture is replaced only by a complete drawing."""

import hashlib
import os
import shutil
import stat
import subprocess

import pytest
from ovf_plugin.plot import safe_write
from ovf_ring.errors import OvfError
from ranks_harness import PYTHON, env
from test_plot import abort_core  # noqa: F401 - the module's core, made once


def _postmortem(core, target, cwd):
    return subprocess.run(
        [PYTHON, "-m", "ovf.postmortem", str(core), "--frames", "0", "--plot", target],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
        cwd=cwd,
    )


def _fingerprint(path):
    st = os.stat(path)
    with open(path, "rb") as f:
        return st.st_size, st.st_mtime_ns, hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def own_core(tmp_path, abort_core):  # noqa: F811 - the fixture imported above
    """A hard link to the module's core in this test's folder: links of it are this test's."""
    core = tmp_path / "victim.core"
    os.link(abort_core, core)
    return core


def test_a_symlink_to_the_core_is_not_written(tmp_path, own_core):
    before = _fingerprint(own_core)
    (tmp_path / "alias.png").symlink_to(own_core.name)
    out = _postmortem(own_core, "alias.png", tmp_path)
    assert out.returncode == 2
    assert out.stderr == (
        f"ovf plot: alias.png is the core this picture is drawn from ({own_core}): "
        f"not overwritten; choose another file name ({own_core})\n"
    )
    assert _fingerprint(own_core) == before
    assert sorted(os.listdir(tmp_path)) == ["alias.png", "victim.core"]  # no .part left


def test_the_core_under_a_picture_name_is_not_written(tmp_path, own_core):
    run = tmp_path / "run.png"
    os.link(own_core, run)
    before = _fingerprint(run)
    out = _postmortem(run, "run.png", tmp_path)
    assert out.returncode == 2
    assert out.stderr == (
        f"ovf plot: run.png is the core this picture is drawn from ({run}): "
        f"not overwritten; choose another file name ({run})\n"
    )
    assert _fingerprint(run) == before


def test_a_file_that_is_not_a_picture_is_not_written(tmp_path, own_core):
    shutil.copy(os.path.realpath(PYTHON), tmp_path / "other.png")  # an ELF, not an input
    script = tmp_path / "train.pdf"
    script.write_text("import torch\n")
    for name, kind in (
        ("other.png", "an ELF file: a core file or a program"),
        ("train.pdf", "not a PNG, SVG or PDF picture"),
    ):
        before = _fingerprint(tmp_path / name)
        out = _postmortem(own_core, name, tmp_path)
        assert out.returncode == 2
        assert out.stderr == (
            f"ovf plot: {name} exists and is {kind}: not overwritten; "
            f"remove it or choose another file name ({own_core})\n"
        )
        assert _fingerprint(tmp_path / name) == before


def test_a_picture_is_replaced_keeping_its_mode_and_an_empty_name_is_refused(
    tmp_path, own_core
):
    out = _postmortem(own_core, "", tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (
        2,
        "",
        "ovf: --plot needs a file name, e.g. --plot ovf-plot.png\n",
    )
    picture = tmp_path / "p.png"
    assert _postmortem(own_core, "p.png", tmp_path).returncode == 0
    os.chmod(picture, 0o640)
    first = picture.read_bytes()
    first_inode = os.stat(picture).st_ino
    link = tmp_path / "latest.png"
    link.symlink_to("p.png")
    again = _postmortem(own_core, "latest.png", tmp_path)
    assert again.returncode == 0, again.stderr
    assert "ovf: wrote latest.png: 14 rows x 34 frames, 1 non-finite cell" in again.stdout
    assert link.is_symlink()  # the link's target is replaced, the link stays a link
    assert picture.read_bytes() == first  # the same drawing,
    assert os.stat(picture).st_ino != first_inode  # written anew and renamed over it
    assert stat.S_IMODE(os.stat(picture).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["latest.png", "p.png", "victim.core"]


def test_a_failed_drawing_leaves_the_old_picture_and_no_scratch_file(tmp_path):
    picture = tmp_path / "p.svg"
    picture.write_bytes(b"<svg>old</svg>")

    def draw(scratch):
        with open(scratch, "wb") as f:
            f.write(b"<svg>half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        safe_write.write_picture(str(picture), draw)
    assert picture.read_bytes() == b"<svg>old</svg>"
    assert os.listdir(tmp_path) == ["p.svg"]
    with pytest.raises(OvfError, match=r"^ovf plot: .* exists and is not a regular file"):
        safe_write.checked_target(str(tmp_path))
