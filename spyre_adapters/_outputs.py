"""Output files: checked before the work starts, written atomically, never lost.

A command that writes files checks every path it was given before doing any work
(:func:`check_file`, :func:`check_directory`), so a typo in ``--json`` costs nothing instead of
a whole sweep. The results are then written with :func:`write_text`: to a temporary file next
to the target, renamed over it (a reader never sees half a file; a non-regular target such as
``/dev/null`` is written in place). When writing fails after the work anyway (disk full,
directory removed meanwhile), :func:`save` keeps the result: it writes it to a fallback file in
the system's temporary directory, or, when that fails too, hands it back to be printed, and
says which in :class:`Saved`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "OutputPathError",
    "Saved",
    "check_directory",
    "check_file",
    "check_new_directory",
    "save",
    "write_text",
    "write_tree",
]


class OutputPathError(ValueError):
    """An output path that cannot be written: ``path`` and ``reason`` (with the remedy)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def _writable_directory(directory: Path, target: Path) -> None:
    if not directory.exists():
        raise OutputPathError(
            target,
            f"directory {directory} does not exist (create it first, or choose another path)",
        )
    if not directory.is_dir():
        raise OutputPathError(target, f"{directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputPathError(
            target, f"directory {directory} is not writable (choose another path)"
        )


def check_file(path: Path | str) -> Path:
    """``path`` as a :class:`~pathlib.Path` when a file can be written there (it may exist
    and is then replaced); else raise :class:`OutputPathError` saying why and what to do."""
    target = Path(path)
    if not str(path):
        raise OutputPathError(target, "the path is empty")
    if target.is_dir():
        raise OutputPathError(
            target, f"it is a directory (name a file in it, e.g. {target / 'out.json'})"
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(target, "the file is not writable (choose another path)")
    _writable_directory(target.parent, target)
    return target


def check_directory(path: Path | str) -> Path:
    """``path`` as a :class:`~pathlib.Path` when files can be written in it: an existing
    writable directory, or one that can be created (its nearest existing ancestor is a
    writable directory); else raise :class:`OutputPathError`."""
    target = Path(path)
    if not str(path):
        raise OutputPathError(target, "the path is empty")
    if target.exists():
        if not target.is_dir():
            raise OutputPathError(target, "it exists and is not a directory")
        if not os.access(target, os.W_OK | os.X_OK):
            raise OutputPathError(target, "the directory is not writable (choose another)")
        return target
    ancestor = target.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputPathError(target, f"{ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputPathError(target, f"it would be created in {ancestor}, which is not writable")
    return target


def check_new_directory(path: Path | str) -> Path:
    """``path`` as a :class:`~pathlib.Path` when a new tree of files may be created there
    (:func:`write_tree`): it does not exist, or is an empty directory, and can be created;
    else raise :class:`OutputPathError`. A command that creates a tree never writes over
    files."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise OutputPathError(target, "it exists and is not a directory; choose a new directory")
    if target.is_dir() and any(target.iterdir()):
        raise OutputPathError(target, "it exists and is not empty; choose a new directory")
    return check_directory(target)


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _creation_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file (0o666 less the umask)."""
    return 0o666 & ~_umask()


def write_tree(target: Path, files: dict[str, str]) -> None:
    """Create the directory ``target`` holding ``files`` (relative path -> UTF-8 text): written
    under a temporary folder beside ``target``, then renamed into place, so a reader never sees
    half a tree. An empty ``target`` is replaced (:func:`check_new_directory` refuses any
    other). Raises :class:`OSError` and leaves nothing behind."""
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        os.chmod(staging, 0o777 & ~_umask())
        if target.is_dir():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_text(path: Path | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file in the same directory,
    renamed over the target. An existing file keeps its mode; a new one gets the usual mode.
    A target that exists and is not a regular file (``/dev/null``, a FIFO) is written in place.
    Raises :class:`OSError` and leaves no temporary file behind."""
    target = Path(path)
    if target.exists() and not target.is_file():
        with target.open("w", encoding="utf-8") as stream:
            stream.write(text)
        return
    mode = target.stat().st_mode & 0o7777 if target.exists() else _creation_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Saved:
    """Where :func:`save` put a result.

    ``path`` is where the text is (the target, or a fallback file), ``None`` when no file could
    be written and the caller must print the text; ``error`` is why the target was not written
    (``None`` when it was).
    """

    target: Path
    path: Path | None
    error: OSError | None = None

    @property
    def ok(self) -> bool:
        """The text is at the requested path."""
        return self.error is None

    def message(self, what: str) -> str:
        """One line for people: where ``what`` went."""
        if self.ok:
            return f"wrote {self.target}"
        why = "" if self.error is None else (self.error.strerror or str(self.error))
        where = f"saved it to {self.path}" if self.path is not None else "it follows on stdout"
        return f"could not write {what} to {self.target} ({why}); {where}"


def save(path: Path | str, text: str) -> Saved:
    """Write ``text`` to ``path`` (:func:`write_text`); when that fails, to a new file in the
    temporary directory named after the target; when that fails too, to no file (the caller
    prints it). Never raises :class:`OSError`."""
    target = Path(path)
    try:
        write_text(target, text)
    except OSError as error:
        stem, suffix = target.stem or "output", target.suffix or ".txt"
        fallback: str | None = None
        try:
            fd, fallback = tempfile.mkstemp(prefix=f"spyre-adapters-{stem}-", suffix=suffix)
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(text)
        except OSError:
            if fallback is not None:
                Path(fallback).unlink(missing_ok=True)
            return Saved(target, None, error)
        return Saved(target, Path(fallback), error)
    return Saved(target, target)
