"""Writing outputs without destroying data.

Every file pcaptools writes (the HTML report, the comparison page, ``--json``, the index of
several reports, Parquet and CSV exports) goes through :func:`atomic_open`: the bytes go to a
new temporary file in the target folder (created with ``O_EXCL``, so nothing already there,
a symlink included, is written through), which is then renamed over the target. A reader
never sees a half-written file, a failed write leaves the old file as it was, and a symlink
at the target is *replaced* by the new file, never followed (run as root, a symlink planted
in an output folder can no longer make pcaptools overwrite a system file).

Targets that are not files are written into, not replaced: whatever this process's stdout
or stderr is (``--json /dev/stdout``, through its descriptor: a pipe, a terminal, or the
file the shell redirected it to), a FIFO or a socket (a named pipe another program reads)
and ``/dev/null``, named directly or through a symlink. Renaming over them would destroy
a device node or a shell's redirection: run as root, ``--json /dev/stdout`` used to
replace the system's ``/dev/stdout`` symlink with a regular file. Any other device named
directly (a disk, ``/dev/mem``) is refused; a symlink to one is replaced like any other
symlink. See :func:`target_kind`.

:func:`check_outputs` runs before any capture is read (the CLI calls it first): it refuses an
output that resolves to an input (the capture, the key log) or to another output, an output
that is a device, and an output whose folder is missing or cannot be written, with
:class:`OutputPathError`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final

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


FILE: Final = "file"
STREAM: Final = "stream"


def _std_fd(st: os.stat_result) -> int | None:
    """1 or 2 when ``st`` is the file, pipe or terminal this process's stdout or stderr is."""
    for fd in (1, 2):
        try:
            s = os.fstat(fd)
        except OSError:
            continue
        if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return None


def _allowed_stream(st: os.stat_result) -> bool:
    """A FIFO, a socket or ``/dev/null``: writing into it destroys nothing."""
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        return True
    if not stat.S_ISCHR(st.st_mode):
        return False
    try:
        return st.st_rdev == os.stat(os.devnull).st_rdev
    except OSError:  # pragma: no cover - every Unix has /dev/null
        return False


def target_kind(path: str | os.PathLike[str]) -> str:
    """How an output ``path`` is written: :data:`FILE` (nothing there, a regular file or a
    folder, or a symlink to anything but a stream: a temporary file is renamed over it) or
    :data:`STREAM` (it is, or is a symlink to, a FIFO, a socket, ``/dev/null``, or whatever
    this process's stdout/stderr is (``/dev/stdout``, ``/proc/self/fd/1``, a terminal):
    written into, never replaced). Raises :class:`OutputPathError` for any other device
    named directly (a disk, ``/dev/mem``): pcaptools neither writes into it nor replaces its
    node."""
    try:
        lst = os.lstat(path)
    except (OSError, ValueError):
        return FILE
    if stat.S_ISREG(lst.st_mode) or stat.S_ISDIR(lst.st_mode):
        return FILE
    try:
        st = os.stat(path) if stat.S_ISLNK(lst.st_mode) else lst
    except (OSError, ValueError):  # a dangling symlink: replaced
        return FILE
    if _std_fd(st) is not None or _allowed_stream(st):
        return STREAM
    if stat.S_ISLNK(lst.st_mode):
        return FILE  # a symlink to a file or to a device: the symlink is replaced
    what = "a block device" if stat.S_ISBLK(st.st_mode) else "a device"
    raise OutputPathError(f"{path} is {what}: refusing to write into it or replace it; "
                          "give a file name (or /dev/stdout, /dev/null)", collision=True)


@contextlib.contextmanager
def _stream_open(path: str | os.PathLike[str], mode: str, encoding: str | None,
                 newline: str | None) -> Iterator[IO[Any]]:
    """Write into an existing stream (see :func:`target_kind`): this process's stdout or
    stderr through a duplicate of its descriptor (its offset and append mode kept), anything
    else opened without creating or truncating and checked again once open (it must still
    be a FIFO, a socket or ``/dev/null``, not a file put there since)."""
    std = _std_fd(os.stat(path))
    if std is not None:
        with contextlib.suppress(Exception):
            (sys.stdout if std == 1 else sys.stderr).flush()
        fd = os.dup(std)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        try:
            if not _allowed_stream(os.fstat(fd)):
                raise OutputPathError(f"{path} changed while pcaptools was running: it is no "
                                      "longer a pipe or /dev/null; nothing was written")
        except BaseException:
            os.close(fd)
            raise
    enc = None if mode == "wb" else encoding
    with os.fdopen(fd, mode, encoding=enc, newline=None if mode == "wb" else newline) as f:
        yield f


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *,
                encoding: str | None = "utf-8", newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); when
    the block ends without an exception it is renamed over ``path`` (a symlink there is
    replaced, not followed); on an exception it is removed and ``path`` is untouched.
    A FIFO, socket, ``/dev/null`` or this process's stdout/stderr at ``path`` (or behind a
    symlink there) is written into instead (:func:`target_kind`); another device raises
    :class:`OutputPathError`.

    Raises OSError when the folder cannot be written (the temporary file cannot be made) or
    ``path`` is a directory.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', not {mode!r}")
    if target_kind(path) == STREAM:
        with _stream_open(path, mode, encoding, newline) as f:
            yield f
        return
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


def inputs_of(*summaries: Any) -> list[Labelled]:
    """The files an output about these captures must not overwrite, from their
    :class:`~pcaptools.result.CaptureSummary`: each capture file (not a stream: its
    ``extra["stream"]``) and each key log given to ``load()`` (``extra["keylog"]``)."""
    out: list[Labelled] = []
    for s in summaries:
        extra = getattr(s, "extra", None) or {}
        path = getattr(s, "path", None)
        if isinstance(path, str) and path and not extra.get("stream"):
            out.append(("the capture", path))
        keylog = extra.get("keylog")
        if isinstance(keylog, str) and keylog:
            out.append(("the key log", keylog))
    return out


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


def refuse_inputs(path: str | os.PathLike[str], inputs: Sequence[Labelled], *,
                  label: str = "the output") -> None:
    """Raise :class:`OutputPathError` (``collision``) when ``path`` resolves to one of
    ``inputs`` (:func:`inputs_of`); the Python writers call it before rendering."""
    for in_label, in_path in inputs:
        if _same(path, in_path):
            raise OutputPathError(
                f"{label} {path} is {in_label} ({in_path}): refusing to overwrite an input; "
                "choose another output path", collision=True)


def export_files(directory: str | os.PathLike[str], tables: Sequence[str],
                 suffix: str) -> list[Path]:
    """The files an export into ``directory`` writes: ``<table><suffix>`` for every table and
    ``captures<suffix>``."""
    d = Path(directory)
    return [d / f"{t}{suffix}" for t in (*tables, "captures")]


def _kind(label: str, path: str | os.PathLike[str]) -> str:
    try:
        return target_kind(path)
    except OutputPathError as exc:
        raise OutputPathError(f"{label} {exc}", collision=True) from None


def _key(path: str | os.PathLike[str], kind: str) -> object:
    """What two outputs must not share: the directory entry a file output replaces, the
    stream a stream output is written into (None for ``/dev/null``: it collides with
    nothing)."""
    if kind == FILE:
        return _entry(path)
    try:
        st = os.stat(path)
        null = os.stat(os.devnull)
    except OSError:
        return _entry(path)
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev:
        return None
    return ("stream", st.st_dev, st.st_ino, st.st_rdev)


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
    collide; two outputs written into one pipe or terminal do, ``/dev/null`` never), when an
    output is an existing folder or a device other than those :func:`target_kind` writes
    into, or when an output's folder is missing or cannot be written (not checked for a
    pipe, a terminal or ``/dev/null``: nothing is created beside them).
    """
    kinds = [_kind(label, path) for label, path in outputs]
    for i, (label, path) in enumerate(outputs):
        refuse_inputs(path, inputs, label=label)
        key = _key(path, kinds[i])
        for j, (other_label, other) in enumerate(outputs[:i]):
            if key is not None and key == _key(other, kinds[j]):
                raise OutputPathError(
                    f"{label} {path} and {other_label} {other} are the same file: one would "
                    "overwrite the other; give them different paths", collision=True)
    checked: set[str] = set()
    created = {_real(f) for _, f in folders}  # (checked below, and made when written)
    for (label, path), kind in zip(outputs, kinds, strict=True):
        if kind == STREAM:
            continue  # written into: no file is created in its folder
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
