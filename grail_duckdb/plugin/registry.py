"""The named indices of each database, shared by its connections and cursors in the process.

An index of a file database ``data/papers.duckdb`` named ``cites`` is written to
``data/papers.cites.grail.parquet`` (the engine's format, one file written atomically); its
metadata also records which table and columns it indexes and a cheap check of that table's
content (:mod:`.staleness`). A new process finds it on the first ``reaches(..., 'cites')``
and loads it without rebuilding, after checking that the edge table did not change.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from ..engine.index import DEFAULT_LABELS, build_index, check_labels
from ..errors import GrailError
from . import names
from .staleness import (SOURCE_VERSION, load_checked, read_edge_table, read_source, same_check,
                        stale_error, table_check)

__all__ = ["Entry", "Registry", "SUMMARY_SQL", "SUMMARY_TYPE", "index_path_for",
           "persisted_names", "registry_by_token"]

SUMMARY_TYPE = pa.struct([
    ("name", pa.string()), ("table_name", pa.string()), ("src", pa.string()),
    ("dst", pa.string()), ("vertices", pa.int64()), ("edges", pa.int64()),
    ("components", pa.int64()), ("dag_edges", pa.int64()), ("labels", pa.int32()),
    ("backend", pa.string()), ("build_seconds", pa.float64()), ("action", pa.string()),
    ("path", pa.string()),
])

SUMMARY_SQL = ("STRUCT(name VARCHAR, table_name VARCHAR, src VARCHAR, dst VARCHAR, "
                "vertices BIGINT, edges BIGINT, components BIGINT, dag_edges BIGINT, "
                "labels INTEGER, backend VARCHAR, build_seconds DOUBLE, action VARCHAR, "
                "path VARCHAR)")

_REGISTRIES: dict[str, "Registry"] = {}

_REGISTRIES_LOCK = threading.Lock()


@dataclass
class Entry:
    """One named index of a database: the engine's index and what it was built from."""

    name: str
    index: object
    table: str  # quoted table name
    src: str  # quoted column names
    dst: str
    path: Path | None
    check: dict  # {"rows": int, "hash": str, "duckdb": version}
    action: str = "built"

    def summary(self) -> dict:
        s = self.index.summary()
        return {
            "name": self.name, "table_name": self.table, "src": self.src, "dst": self.dst,
            "vertices": s["vertices"], "edges": s["edges"], "components": s["components"],
            "dag_edges": s["dag_edges"], "labels": s["labels"], "backend": s["backend"],
            "build_seconds": float(s["build_seconds"]), "action": self.action,
            "path": str(self.path) if self.path is not None else None,
        }

    def source(self) -> dict:
        """Table, columns, labels and the cheap check, stored in the index file's metadata."""
        return {"version": SOURCE_VERSION, "name": self.name, "table": self.table,
                "src": self.src, "dst": self.dst, "labels": self.index.d, **self.check}

@dataclass
class Registry:
    """The named indices of one database, shared by its connections and cursors (in-process).

    ``db_path`` is the database file (None for an in-memory database); ``con`` a connection to
    the database, used to open cursors that read edge tables from inside a running query.
    """

    token: str
    db_path: Path | None
    con: object
    entries: dict = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def cursor(self):
        """A fresh cursor on this database (a query's own connection cannot run queries),
        with DuckDB's progress bar off: the scans it runs inside a query print nothing."""
        try:
            cur = self.con.cursor()
        except duckdb.Error:
            if self.db_path is None:
                raise GrailError("the connection grail_duckdb was installed on is closed; call "
                                 "grail_duckdb.install(con) on a live connection") from None
            self.con = duckdb.connect(str(self.db_path))
            cur = self.con.cursor()
        cur.execute("SET enable_progress_bar = false")
        return cur

    def default_path(self, name: str) -> Path | None:
        """Where an index named ``name`` is persisted when no path is given."""
        return index_path_for(self.db_path, name) if self.db_path is not None else None

    def get(self, name: str) -> Entry:
        """The entry for ``name`` ('' = the only index), loading a persisted one if needed."""
        with self.lock:
            if not name:
                return self._only()
            entry = self.entries.get(name)
            if entry is None:
                entry = self._load_persisted(name)
            return entry

    def _only(self) -> Entry:
        names = sorted(self.entries)
        if not names and self.db_path is not None:
            names = persisted_names(self.db_path)
        if len(names) == 1:
            return self.get(names[0])
        if not names:
            raise GrailError(
                "no reachability index in this database yet: build one with "
                "SELECT grail_index('edge_table', src := 'src', dst := 'dst')")
        raise GrailError(
            f"this database has several reachability indices ({', '.join(names)}); name one: "
            f"reaches(a, b, '{names[0]}')")

    def _load_persisted(self, name: str) -> Entry:
        path = self.default_path(name)
        if path is None or not path.exists():
            known = sorted(self.entries)
            hint = f" (known: {', '.join(known)})" if known else ""
            raise GrailError(
                f"no reachability index named {name!r} in this database{hint}: build it with "
                f"SELECT grail_index('edge_table', name := '{name}')")
        side = read_source(path)
        cur = self.cursor()
        try:
            index, check = load_checked(cur, name, path, side["table"], side["src"],
                                        side["dst"], side)
        finally:
            cur.close()
        entry = Entry(name, index, side["table"], side["src"], side["dst"], path, check,
                      "loaded")
        self.entries[name] = entry
        return entry

    # --- build, reuse or load ---------------------------------------------------------------
    def build(self, table: str, *, src="src", dst="dst", labels=DEFAULT_LABELS, name=None,
              path=None, rebuild=False, progress=None) -> dict:
        """Build, reuse or load the index ``name`` of ``table``; returns its summary."""
        qtable = names.quote_table(table)
        qsrc, qdst = names.quote_column(src), names.quote_column(dst)
        name = names.index_name(name if name else names.table_leaf(table))
        labels = check_labels(labels)
        with self.lock:
            target = Path(path).resolve() if path else self.default_path(name)
            cur = self.cursor()
            try:
                check = table_check(cur, qtable, qsrc, qdst)
                entry = None if rebuild else self._reusable(cur, name, target, qtable, qsrc,
                                                            qdst, labels, check)
                if entry is None:
                    entry = _build_entry(cur, name, target, qtable, qsrc, qdst, labels, check,
                                         progress)
            finally:
                cur.close()
            self.entries[name] = entry
            return entry.summary()

    def _reusable(self, cur, name, target, qtable, qsrc, qdst, labels, check) -> Entry | None:
        """A cached or persisted index of the same table, columns and labels that is still
        fresh; a stale one is refused (rebuild := true replaces it); None when there is none."""
        entry = self.entries.get(name)
        if (entry is not None and (entry.table, entry.src, entry.dst, entry.index.d)
                == (qtable, qsrc, qdst, labels) and entry.path == target):
            if same_check(entry.check, check):
                entry.action = "cached"
                return entry
            raise stale_error(name, qtable)
        if target is None or not target.exists():
            return None
        side = read_source(target)
        if (side["table"], side["src"], side["dst"], side["labels"]) != (qtable, qsrc, qdst,
                                                                         labels):
            return None
        index, check = load_checked(cur, name, target, qtable, qsrc, qdst, side, check)
        return Entry(name, index, qtable, qsrc, qdst, target, check, "loaded")


def _build_entry(cur, name, target, qtable, qsrc, qdst, labels, check, progress) -> Entry:
    """Read the edge table through ``cur``, build the index, persist it with its source."""
    edges = read_edge_table(cur, qtable, qsrc, qdst)
    index = build_index(edges, labels=labels, progress=progress)
    entry = Entry(name, index, qtable, qsrc, qdst, target, check, "built")
    if target is not None:
        index.save(target, source=entry.source())
    return entry


def index_path_for(db_path, name: str) -> Path:
    """``<folder>/<db stem>.<name>.grail.parquet`` beside a database file."""
    db_path = Path(db_path)
    return db_path.with_name(f"{db_path.stem}.{name}.grail.parquet")

def persisted_names(db_path) -> list[str]:
    """Names of the indices persisted beside a database file."""
    db_path = Path(db_path)
    prefix, suffix = f"{db_path.stem}.", ".grail.parquet"
    return sorted(p.name[len(prefix):-len(suffix)]
                  for p in db_path.parent.glob(f"{db_path.stem}.*{suffix}"))


def registry_by_token(token: str) -> Registry:
    """The registry a registered function belongs to (looked up per call: a dict access)."""
    reg = _REGISTRIES.get(token)
    if reg is None:
        raise GrailError("grail_duckdb lost this database's index registry; call "
                         "grail_duckdb.install(con) again")
    return reg


def find_or_create(con, token: str | None) -> tuple[Registry, bool]:
    """The registry of ``token`` (found again by a later ``install``), or a new one for
    ``con``'s database; the flag says whether it is new (its functions need registering)."""
    with _REGISTRIES_LOCK:
        reg = _REGISTRIES.get(token) if token is not None else None
        if reg is not None:
            if _closed(reg.con):
                reg.con = con
            return reg, False
        row = con.execute("SELECT path FROM duckdb_databases() "
                          "WHERE database_name = current_database()").fetchall()
        db_path = Path(row[0][0]).resolve() if row and row[0][0] else None
        reg = Registry(token or uuid.uuid4().hex, db_path, con)
        _REGISTRIES[reg.token] = reg
        return reg, token is None


def _closed(con) -> bool:
    try:
        con.execute("SELECT 1").fetchall()
        return False
    except duckdb.Error:
        return True
