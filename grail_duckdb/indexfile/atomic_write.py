"""Replacing an index file safely: never over someone else's file, never half-written.

* **Only our own files are replaced.** A path that exists must be an index written by this
  project (a Parquet file whose footer names the format); a DuckDB database, a user's Parquet
  file, any other file or a folder is refused with an error that names it.
* **Atomic.** The index is written to a temporary ``.<name>.<random>.tmp`` beside the target,
  flushed, then renamed over it: a crash at any point leaves the previous file intact.
* **Leftovers of a killed writer are removed.** The writer holds an exclusive ``flock`` on its
  temporary while writing; a temporary of the same target whose lock can be taken belongs to a
  writer that died (SIGKILL, power loss) and is deleted by the next save. A temporary
  still locked belongs to a live writer and is left alone.
* **The user's umask decides the mode**: the temporary is created with mode 0666 and
  the umask applied by the system, as any file the user creates (``mkstemp`` made them 0600).
* **The replaced file is removed after the rename, on a thread of its own.** Freeing a large
  file's blocks is slow on some file systems (ext4 mounted with ``discard`` trims every
  block, seconds for a large index), and a save that replaced an index would wait for it. The old file is kept under a
  temporary name (a hard link) until the new one is in place, then unlinked in the
  background; the process waits for that at exit (:func:`wait_for_removals`), and a
  leftover of a process that died is a stale temporary like any other.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import threading
from pathlib import Path

import pyarrow.parquet as pq

from ..errors import IndexFileError
from .format import FORMAT_META_KEY

try:  # POSIX advisory locks; elsewhere stale temporaries are left in place
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

#: the schema metadata key whose value names the index format
FORMAT_KEY = FORMAT_META_KEY.encode()


def is_index_file(path: Path, format_name: str) -> bool:
    """True when ``path`` is an index of this project: a Parquet file whose footer names the
    format (any version: an older index of ours may be replaced), or a damaged one, named
    ``*.grail.parquet``, that begins as Parquet but whose footer cannot be read (a truncated
    index: nothing in it can be read back, and a rebuild must be able to replace it)."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception:  # not Parquet, truncated, unreadable
        if not path.name.endswith(".grail.parquet"):
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    return meta.get(FORMAT_KEY) == format_name.encode()


def check_replaceable(path: Path, format_name: str) -> None:
    """Refuse a target that exists and is not an index written by this project."""
    if not os.path.lexists(path):
        return
    if path.is_dir():
        raise IndexFileError(f"{path} is a folder; choose an index file name such as "
                             f"{path / 'edges.grail.parquet'}")
    if path.is_symlink() or not path.is_file() or not is_index_file(path, format_name):
        raise IndexFileError(
            f"refusing to overwrite {path}: it is not an index written by grail_duckdb (it may "
            "be a database or a data file); choose another path, e.g. "
            f"{path.with_name(path.stem + '.grail.parquet')}, or delete that file yourself")


def _temporaries_of(path: Path):
    prefix = f".{path.name}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp") \
                    and len(entry.name) > len(prefix) + 4:
                yield Path(entry.path)


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporaries of ``path`` left by writers that died; returns them."""
    removed = []
    if fcntl is None:
        return removed
    for tmp in _temporaries_of(path):
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live writer holds it
            os.close(fd)
            continue
        try:
            os.unlink(tmp)
            removed.append(tmp)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def temporary_beside(path: Path):
    """A new, locked temporary file beside ``path`` (mode 0666 less the umask); yields its
    path and descriptor, and removes it unless it was renamed away."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield tmp, fd
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.close(fd)


class Replacement:
    """A new ``path`` under way: the checks and the stale clean-up done, a locked temporary
    open beside it (``tmp``, ``fd``); :meth:`commit` flushes it and renames it over ``path``,
    :meth:`discard` removes it. It may stay open while the rest of the work goes on (the
    index's children are written during the build's label passes: :mod:`.writer`)."""

    def __init__(self, path: Path, format_name: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_replaceable(self.path, format_name)
        remove_stale_temporaries(self.path)
        self._stack = contextlib.ExitStack()
        tmp, self.fd = self._stack.enter_context(temporary_beside(self.path))
        self.tmp = str(tmp)

    def commit(self, *, fsync: bool = True) -> Path:
        """Flush the temporary, rename it over the target and flush the folder; the file it
        replaced is removed in the background."""
        old = None
        try:
            if fsync:
                os.fsync(self.fd)
            old = _keep_aside(self.path)
            os.replace(self.tmp, self.path)
        except BaseException:
            if old is not None:
                _remove(old)
            raise
        finally:
            self._stack.close()
        if fsync and hasattr(os, "O_DIRECTORY"):
            dfd = os.open(self.path.parent, os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        if old is not None:
            _remove_later(old)
        return self.path

    def discard(self) -> None:
        """Remove the temporary (the target stays as it was)."""
        self._stack.close()


#: the removals of replaced files still under way (:func:`wait_for_removals`)
_REMOVALS: list[threading.Thread] = []
_REMOVALS_LOCK = threading.Lock()


def _keep_aside(path: Path) -> Path | None:
    """A second name for the file at ``path`` (a temporary beside it, a hard link), so that
    renaming another file over ``path`` does not free its blocks; None where there is no
    file or no hard link can be made (the rename then frees them itself)."""
    if not path.is_file() or path.is_symlink():
        return None
    aside = path.with_name(f".{path.name}.{secrets.token_hex(6)}.old.tmp")
    try:
        os.link(path, aside)
    except OSError:
        return None
    return aside


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove_later(path: Path) -> None:
    """Unlink ``path`` on a thread of its own (not a daemon: the interpreter waits for it at
    exit, so no replaced file is left behind)."""
    thread = threading.Thread(target=_remove, args=(path,), name="grail-duckdb-remove")
    with _REMOVALS_LOCK:
        _REMOVALS[:] = [t for t in _REMOVALS if t.is_alive()]
        _REMOVALS.append(thread)
    thread.start()


def wait_for_removals() -> None:
    """Wait until every replaced file is removed."""
    with _REMOVALS_LOCK:
        pending = list(_REMOVALS)
    for thread in pending:
        thread.join()
