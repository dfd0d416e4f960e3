"""Writing outputs without destroying data.

Every file pcaptools writes (the HTML report, the comparison page, ``--json``, the index of
several reports, Parquet and CSV exports) goes through :func:`atomic_open`: the bytes go to a
new temporary file in the target folder (created with ``O_EXCL``, so nothing already there,
a symlink included, is written through), which is then renamed over the target. A reader
never sees a half-written file, a failed write leaves the old file as it was, and a symlink
at the target is *replaced* by the new file, never followed (run as root, a symlink planted
in an output folder can no longer make pcaptools overwrite a system file).

:func:`check_outputs` runs before any capture is read (the CLI calls it first): it refuses an
output that resolves to an input (the capture, the key log) or to another output, and an
output whose folder is missing or cannot be written, with :class:`OutputPathError`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .errors import OutputPathError

Labelled = tuple[str, "str | os.PathLike[str]"]
"""(what the path is, for messages: ``"-o"``, ``"--json"``, ``"the capture"``; the path)"""


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (not thread-safe: only where /proc is absent)
    os.umask(mask)
    return mask


def mode_for(path: Path) -> int:
    """The permission bits the file would get from a plain ``open(path, "w")``: those of the
    regular file it replaces, else 0o666 minus the umask."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0o666 & ~_umask()
    if stat.S_ISREG(st.st_mode):
        return stat.S_IMODE(st.st_mode)
    return 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *,
                encoding: str | None = "utf-8", newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); when
    the block ends without an exception it is renamed over ``path`` (a symlink there is
    replaced, not followed); on an exception it is removed and ``path`` is untouched.

    Raises OSError when the folder cannot be written (the temporary file cannot be made) or
    ``path`` is a directory.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', not {mode!r}")
    target = Path(path)
    folder = target.parent
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".partial")
    try:
        enc = None if mode == "wb" else encoding
        with os.fdopen(fd, mode, encoding=enc, newline=None if mode == "wb" else newline) as f:
            yield f
        os.chmod(tmp, mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``Path(path).write_text(text, encoding="utf-8")``, atomically (:func:`atomic_open`)."""
    with atomic_open(path, "w") as f:
        f.write(text)


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(path))


def _entry(path: str | os.PathLike[str]) -> str:
    """The directory entry a write replaces: the folder resolved, the name kept (a symlink
    there is replaced, so two outputs collide only when they name the same entry)."""
    p = Path(os.path.abspath(path))
    return os.path.join(os.path.realpath(p.parent), p.name)


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """The two paths name the same file: same resolved path, or (both existing) the same
    inode (a hard link)."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _check_folder(label: str, path: Path, folder: Path, checked: set[str]) -> None:
    key = _real(folder)
    if key in checked:
        return
    if not folder.exists():
        raise OutputPathError(f"{label} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputPathError(f"{label} {path}: {folder} is not a folder")
    try:  # the one test that also catches read-only file systems and ACLs
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".pcaptools-probe.")
    except OSError as exc:
        raise OutputPathError(
            f"{label} {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    checked.add(key)


def export_files(directory: str | os.PathLike[str], tables: Sequence[str],
                 suffix: str) -> list[Path]:
    """The files an export into ``directory`` writes: ``<table><suffix>`` for every table and
    ``captures<suffix>``."""
    d = Path(directory)
    return [d / f"{t}{suffix}" for t in (*tables, "captures")]


def check_outputs(outputs: Sequence[Labelled], inputs: Sequence[Labelled], *,
                  folders: Sequence[Labelled] = ()) -> None:
    """Refuse outputs that would destroy data, before anything is read or written.

    ``outputs``: files about to be written; ``inputs``: files that must survive (the capture,
    the key log); ``folders``: output folders that may be created (``--export DIR``, the
    report folder of several captures): their nearest existing ancestor must be a writable
    folder (outputs inside them are not checked for a folder). Raises
    :class:`OutputPathError` naming both paths when an output resolves (symlinks followed,
    hard links found) to an input, when two outputs name the same directory entry (their
    folders resolved: a symlink at an output is replaced, so two symlinks to one file do not
    collide), when an output is an existing folder, or when an output's folder is missing or
    cannot be written.
    """
    for i, (label, path) in enumerate(outputs):
        for in_label, in_path in inputs:
            if _same(path, in_path):
                raise OutputPathError(
                    f"{label} {path} is {in_label} ({in_path}): refusing to overwrite an input; "
                    "choose another output path", collision=True)
        for other_label, other in outputs[:i]:
            if _entry(path) == _entry(other):
                raise OutputPathError(
                    f"{label} {path} and {other_label} {other} are the same file: one would "
                    "overwrite the other; give them different paths", collision=True)
    checked: set[str] = set()
    created = {_real(f) for _, f in folders}  # (checked below, and made when written)
    for label, path in outputs:
        p = Path(path)
        if p.is_dir():
            raise OutputPathError(f"{label} {p} is a folder: give a file name")
        if _real(p.parent) not in created:
            _check_folder(label, p, p.parent, checked)
    for label, folder in folders:
        f = Path(folder)
        if f.exists():
            if not f.is_dir():
                raise OutputPathError(f"{label} {f} exists and is not a folder")
            _check_folder(label, f, f, checked)
            continue
        parent = f.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise OutputPathError(f"{label} {f}: {parent} is not a folder")
        _check_folder(label, f, parent, checked)
