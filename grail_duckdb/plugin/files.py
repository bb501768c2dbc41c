"""Where the index files of a database live, what they record, and writing them safely.

An index named ``cites`` of a file database ``data/papers.duckdb`` is written to
``data/papers.duckdb.cites.grail.parquet``: the database's whole file name comes first, so
``x.duckdb`` and ``x.db`` in one folder never share files, and ``x.y.duckdb``'s indices never
appear among ``x.duckdb``'s. An ATTACHed file database keeps its indices next to its own file.

Each file records (in its metadata, ``source.*``) the index name, the database file, the table,
its columns, the label count and a check of the table's content, and every load checks them: a
file copied over another index's file is refused by its recorded name, and a file of another
table or of changed content is refused by the content check.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from ..indexfile import IndexWriter, read_metadata
from ..errors import GrailError, IndexFileError

__all__ = ["SOURCE_VERSION", "SUFFIX", "GrailWarning", "index_path_for", "orphans",
           "kept_in_memory", "open_writer", "other_copies", "persisted_names", "read_source",
           "refuse_foreign"]

SUFFIX = ".grail.parquet"
#: version 2: the file also records the index name and the database file
SOURCE_VERSION = 2
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


class GrailWarning(UserWarning):
    """Something worked, but not as asked (e.g. an index kept in memory only)."""


def index_path_for(db_file, name: str) -> Path:
    """``<folder>/<database file name>.<name>.grail.parquet`` beside a database file.

    >>> index_path_for('/data/papers.duckdb', 'cites').as_posix()
    '/data/papers.duckdb.cites.grail.parquet'
    """
    db_file = Path(db_file)
    return db_file.with_name(f"{db_file.name}.{name}{SUFFIX}")


def persisted_names(db_file) -> list[str]:
    """The names of the indices persisted beside a database file (only its own files)."""
    db_file = Path(db_file)
    prefix = f"{db_file.name}."
    out = []
    for p in db_file.parent.glob(f"{_glob_escape(db_file.name)}.*{SUFFIX}"):
        middle = p.name[len(prefix):-len(SUFFIX)]
        if _NAME.match(middle):
            out.append(middle)
    return sorted(out)


def other_copies(db_file, name: str) -> list[Path]:
    """Index files named ``name`` beside ``db_file`` that belong to other database files (a
    renamed or copied database finds its indices among these)."""
    db_file = Path(db_file)
    own = index_path_for(db_file, name)
    return sorted(p for p in db_file.parent.glob(f"*.{_glob_escape(name)}{SUFFIX}")
                  if p != own and p.is_file())


def orphans(db_file) -> list[str]:
    """Names of index files beside ``db_file`` written for a database file that no longer
    exists (this one, before it was renamed)."""
    db_file = Path(db_file)
    out = []
    for p in db_file.parent.glob(f"*{SUFFIX}"):
        try:
            side = read_source(p)
        except (IndexFileError, OSError):
            continue
        recorded = side.get("database")
        if recorded and not Path(recorded).exists() and side.get("name"):
            out.append(side["name"])
    return sorted(set(out))


def _glob_escape(text: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", text)


def read_source(path: Path) -> dict:
    """What an index file records about its edge table; an index file without it (built
    outside SQL) or with a newer description is an :class:`IndexFileError`."""
    meta = read_metadata(path)
    doc = dict(meta.source)
    doc["fingerprint"] = meta.fingerprint
    try:
        if int(doc.get("version", 0)) > SOURCE_VERSION:
            raise IndexFileError(f"{path} was written by a newer grail_duckdb; "
                                 "upgrade grail_duckdb or rebuild the index")
        doc["labels"] = int(doc["labels"])
        for key in ("table", "src", "dst", "rows", "hash"):
            doc[key]
        return doc
    except IndexFileError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexFileError(
            f"{path} does not say which edge table it was built from "
            f"({exc.__class__.__name__}: {exc}); rebuild it with grail_index(..., rebuild := true)"
        ) from None


def open_writer(target: Path, source: dict) -> tuple[IndexWriter | None, str]:
    """An :class:`~grail_duckdb.indexfile.IndexWriter` for ``target`` that records
    ``source``, opened before the build so that the build writes the file as it goes
    (``build_index(..., save_to=writer)``); returns ``(writer, "")``.

    A file there that is neither a grail_duckdb index nor named like one (``*.grail.parquet``:
    a damaged index of ours) is never overwritten (an error names it, before any work). A
    folder that cannot be written keeps the index in memory: ``(None, note)``, with a
    :class:`GrailWarning` (:func:`kept_in_memory`).
    """
    refuse_foreign(target)
    try:
        return IndexWriter(target, source=source), ""
    except OSError as exc:
        return None, kept_in_memory(source, target, exc)


def refuse_foreign(target: Path) -> None:
    """A file at ``target`` that is neither a grail_duckdb index nor named like one
    (``*.grail.parquet``: a damaged index of ours) is refused, before any work: it may be the
    user's database or data."""
    if target.exists() and not target.name.endswith(SUFFIX):
        try:
            read_metadata(target)
        except IndexFileError:
            raise GrailError(
                f"{target} exists and is not a grail_duckdb index file; it is not "
                "overwritten: choose another file with path := '...'") from None


def kept_in_memory(source: dict, target: Path, exc: OSError) -> str:
    """The note (also a :class:`GrailWarning`) of an index whose file could not be written:
    it stays in memory for this process, and ``path := ...`` chooses another place."""
    note = (f"not saved: {target.parent} cannot be written ({exc.strerror or exc}); the "
            "index is kept in memory for this process; choose a writable file with "
            "grail_index(..., path := '/writable/folder/name.grail.parquet')")
    warnings.warn(f"grail_duckdb: index {source.get('name')!r} {note}", GrailWarning,
                  stacklevel=3)
    return note
