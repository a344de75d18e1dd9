"""Writing a picture without losing anything: the target is never one of the
files the picture is drawn from, never a file that is not a picture already,
and is replaced only by a complete drawing.

A picture file name is typed by hand next to the core it comes from, so a slip
(`--plot run.png` where run.png is the core, a symlink or hard link to it) must
cost a refusal, not the core. Links are followed and files compared by device
and inode; whatever the name, an existing file that is not a PNG, SVG or PDF
(a core, a program, a script) is not replaced. The drawing goes to a temporary
file in the target's folder, renamed over the target only when complete, so an
interrupted or failed drawing leaves the old file as it was."""

import os
import stat
import tempfile

from ovf_ring.errors import OvfError

# How each format's files begin (SVG: an XML declaration or the svg element).
_PICTURE_STARTS = (b"\x89PNG\r\n\x1a\n", b"<?xml", b"<svg", b"%PDF-")


def _kind_of(head):
    if head.startswith(b"\x7fELF"):
        return "an ELF file: a core file or a program"
    return "not a PNG, SVG or PDF picture"


def checked_target(path, inputs=()):
    """The real path to write `path`'s picture to, or OvfError in one line when
    writing there would lose something: `path` is (a link to) one of `inputs`,
    is not a regular file, or is a non-empty file that is not a picture."""
    if not path or not path.strip():
        raise OvfError("ovf plot: no file name given: name the picture, e.g. ovf-plot.png")
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as e:
        raise OvfError(f"ovf plot: cannot write {path}: {e.strerror or e}") from None
    for source in inputs:
        try:
            same = os.path.samestat(st, os.stat(source))
        except OSError:
            continue
        if same:
            raise OvfError(
                f"ovf plot: {path} is the core this picture is drawn from ({source}): "
                "not overwritten; choose another file name"
            )
    if not stat.S_ISREG(st.st_mode):
        raise OvfError(
            f"ovf plot: {path} exists and is not a regular file: not written; "
            "choose another file name"
        )
    if st.st_size:
        try:
            with open(real, "rb") as f:
                head = f.read(16)
        except OSError as e:
            raise OvfError(f"ovf plot: cannot write {path}: {e.strerror or e}") from None
        if not head.startswith(_PICTURE_STARTS):
            raise OvfError(
                f"ovf plot: {path} exists and is {_kind_of(head)}: not overwritten; "
                "remove it or choose another file name"
            )
    return real


def _umask():
    """The process's umask, read without setting it (os.umask would change it
    for every thread of the debugger meanwhile)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def write_picture(path, draw, inputs=()):
    """Calls draw(temporary path) and renames its file over `path` when it
    returns; checks the target before drawing and again before the rename (the
    drawing takes seconds). The new file gets the usual mode (0666 less the
    umask) or the replaced picture's."""
    real = checked_target(path, inputs)
    folder = os.path.dirname(real) or "."
    try:
        fd, scratch = tempfile.mkstemp(
            dir=folder, prefix=f".{os.path.basename(real)}.", suffix=".part"
        )
    except OSError as e:
        raise OvfError(f"ovf plot: cannot write {path}: {e.strerror or e}") from None
    os.close(fd)
    try:
        draw(scratch)
        checked_target(path, inputs)
        try:
            mode = stat.S_IMODE(os.stat(real).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(scratch, mode)
        os.replace(scratch, real)
    except BaseException:
        try:
            os.unlink(scratch)
        except OSError:
            pass
        raise
