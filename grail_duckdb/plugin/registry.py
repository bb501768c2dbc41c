"""The named indices of each database, shared by its connections and cursors in the process.

A :class:`Registry` belongs to one DuckDB database instance and lives while any connection
object that grail_duckdb was installed on does (see :mod:`.connections`); it holds no strong
reference to a connection, so dropping the last one releases its indices. Each index is an
:class:`Entry`: the engine's index, what it was built from, where its file is, and its
freshness (:mod:`.staleness`), checked before every statement that uses it.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from ..engine.build import build_index, check_labels, default_labels
from ..engine.index import load_index
from ..engine.paths import EdgeSource
from ..errors import GrailError, IndexFileError, IndexNotSavedError, StaleIndexError
from . import appends, duckdb_api, files, hooks, names
from .resolve import apply_session, outside_sources, resolve
from .staleness import (load_checked, read_edge_table, same_check, signals, stale_error,
                        table_check)

__all__ = ["Entry", "Registry", "SUMMARY_SQL", "SUMMARY_TYPE", "new_registry",
           "registry_by_token"]

SUMMARY_FIELDS = [
    ("name", pa.string(), "VARCHAR"), ("table_name", pa.string(), "VARCHAR"),
    ("src", pa.string(), "VARCHAR"), ("dst", pa.string(), "VARCHAR"),
    ("vertices", pa.int64(), "BIGINT"), ("edges", pa.int64(), "BIGINT"),
    ("components", pa.int64(), "BIGINT"), ("dag_edges", pa.int64(), "BIGINT"),
    ("labels", pa.int32(), "INTEGER"), ("backend", pa.string(), "VARCHAR"),
    ("build_seconds", pa.float64(), "DOUBLE"), ("action", pa.string(), "VARCHAR"),
    ("path", pa.string(), "VARCHAR"), ("auto_rebuild", pa.bool_(), "BOOLEAN"),
    ("note", pa.string(), "VARCHAR"),
]
SUMMARY_TYPE = pa.struct([(n, t) for n, t, _ in SUMMARY_FIELDS])
SUMMARY_SQL = "STRUCT(" + ", ".join(f"{n} {s}" for n, _, s in SUMMARY_FIELDS) + ")"

_REGISTRIES: "weakref.WeakValueDictionary[str, Registry]" = weakref.WeakValueDictionary()


@dataclass(eq=False)
class Entry:
    """One named index of a database: the engine's index, its source and its freshness."""

    name: str
    index: object
    table: str  # quoted table name
    src: str  # quoted column names
    dst: str
    labels: int
    path: Path | None
    check: dict  # {"rows", "hash", "duckdb"}: the content check at build time
    where: tuple | None  # (database, schema, name, kind) of the edge table
    action: str = "built"
    auto_rebuild: bool = False
    note: str = ""
    verified: int | None = None  # catalog version at the last successful freshness check
    #: the write statements that were running during that check: it is made again once one
    #: of them is done (DuckDB's version moves when a write starts, its rows land at commit)
    pending: frozenset = frozenset()
    signals: tuple | None = None
    stale: str | None = None  # the error message, once found stale (until rebuilt)
    tracker: object = None  # what the index's snapshot of the table was (.appends)
    cache: dict = field(default_factory=dict)  # one-to-all sets and the like (traversal)
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: the caller named the label pairs (else any index of the table will do, whatever its d:
    #: the backends' defaults differ, and a file built on one is loaded on the other)
    labels_named: bool = True

    def same_source(self, table: str, src: str, dst: str, labels: int) -> bool:
        """Whether an index of ``table``'s columns with ``labels`` pairs serves this one."""
        return ((table, src, dst) == (self.table, self.src, self.dst)
                and (labels == self.labels or not self.labels_named))

    def rebuild_sql(self) -> str:
        """The statement that rebuilds this index as it was built (pasteable)."""
        s, r = names.sql_string, names.readable
        return (f"SELECT grail_index({s(r(self.table))}, src := {s(r(self.src))}, dst := "
                f"{s(r(self.dst))}, labels := {self.labels}, name := {s(self.name)}, rebuild := "
                f"true{', auto_rebuild := true' if self.auto_rebuild else ''})")

    def summary(self) -> dict:
        s = self.index.summary()
        return {
            "name": self.name, "table_name": names.plain_table(self.table),
            "src": names.column_name(self.src), "dst": names.column_name(self.dst),
            "vertices": s["vertices"], "edges": s["edges"], "components": s["components"],
            "dag_edges": s["dag_edges"], "labels": s["labels"], "backend": s["backend"],
            "build_seconds": float(s["build_seconds"]), "action": self.action,
            "path": str(self.path) if self.path is not None else None,
            "auto_rebuild": self.auto_rebuild, "note": self.note or None,
        }

    def source(self, database: str) -> dict:
        """What the index file records about its source (checked on every load)."""
        return {"version": files.SOURCE_VERSION, "name": self.name, "database": database,
                "table": self.table, "src": self.src, "dst": self.dst, "labels": self.labels,
                **self.check, **appends.persisted_source(self)}


@dataclass(eq=False)
class Registry:
    """The named indices of one database instance, shared by its connections and cursors.

    ``db_path`` is the main database file (None in memory). The registry keeps only weak
    references to connections (``owners``); it opens cursors on a live one to read edge tables
    and check them, also from inside a running query (a query's own connection cannot).
    """

    token: str
    db_path: Path | None
    owners: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    _live: weakref.ref | None = field(default=None, repr=False)  # the last live owner
    entries: dict = field(default_factory=dict)
    plans: OrderedDict = field(default_factory=OrderedDict)  # statement plans (.statements)
    kept: list = field(default_factory=list)  # callables the catalog may name (.connections)
    lock: threading.RLock = field(default_factory=threading.RLock)

    # --- connections ------------------------------------------------------------------------
    def add_owner(self, con) -> None:
        self.owners.add(con)

    def connection(self):
        """A live connection of this database (the last one found, while it stays open)."""
        last = self._live() if self._live is not None else None
        if last is not None:
            try:
                duckdb_api.catalog_version(last)
                return last
            except duckdb.Error:
                pass
        for con in list(self.owners):
            try:
                duckdb_api.catalog_version(con)
                self._live = weakref.ref(con)
                return con
            except duckdb.Error:
                continue
        raise GrailError("every connection grail_duckdb was installed on in this "
                         "database is closed; call grail_duckdb.install(con) on a live one")

    def catalog_version(self) -> int:
        """DuckDB's count of writing statements in this database instance (free to read): one
        read on the last live connection, the per-chunk path's case."""
        last = self._live() if self._live is not None else None
        if last is not None:
            try:
                return duckdb_api.catalog_version(last)
            except duckdb.Error:
                pass
        return duckdb_api.catalog_version(self.connection())

    def cursor(self, quiet: bool = True):
        """A fresh cursor on this database; ``quiet``: with DuckDB's progress bar off (the long
        scans it runs inside a query print nothing). That SET counts as a write in DuckDB's
        catalog version, so read the version after making the cursor."""
        cur = self.connection().cursor()
        if quiet:
            cur.execute("SET enable_progress_bar = false")
        return cur

    # --- lookup -------------------------------------------------------------------------------
    def get(self, name: str) -> Entry:
        """The entry for ``name`` ('' = the only index), loading a persisted one if needed."""
        if name:
            entry = self.entries.get(name)
            if entry is not None:
                return entry
        else:
            only = list(self.entries.values())
            if len(only) == 1:
                return only[0]
        with self.lock:
            if not name:
                return self._only()
            entry = self.entries.get(name)
            return entry if entry is not None else self._load_persisted(name)

    def _only(self) -> Entry:
        known = sorted(self.entries)
        if not known and self.db_path is not None:
            known = files.persisted_names(self.db_path) or files.orphans(self.db_path)
        if len(known) == 1:
            return self.get(known[0])
        if not known:
            raise GrailError(
                "no reachability index in this database yet: build one with "
                "SELECT grail_index('edge_table', src := 'src', dst := 'dst')")
        raise GrailError(
            f"this database has several reachability indices ({', '.join(known)}); "
            f"name one: reaches(a, b, '{known[0]}')")

    def _load_persisted(self, name: str) -> Entry:
        """Load the persisted index ``name`` of this database (or, for a renamed or copied
        database, the one of its previous file whose table content still matches)."""
        names.index_name(name)
        own = next((p for p in self._own_files(name) if p.exists()), None)
        candidates = [own] if own is not None else []
        if not candidates and self.db_path is not None:
            candidates = files.other_copies(self.db_path, name)
        if not candidates:
            known = sorted(self.entries)
            hint = f" (known: {', '.join(known)})" if known else ""
            raise GrailError(
                f"no reachability index named {name!r} in this database{hint}: "
                f"build it with SELECT grail_index('edge_table', name := '{name}')")
        reasons = []
        for path in candidates:
            try:
                entry = self._load_file(name, path, own=path is own)
            except (IndexFileError, StaleIndexError) as exc:
                if path is own:
                    raise
                reasons.append(f"{path.name}: {str(exc).split(': ', 1)[-1]}")
                continue
            if own is None:
                entry.note = (f"loaded from {path.name}, written for another database file "
                              f"(renamed or copied); its table content matches")
            entry.index.edge_source = self.edge_source(entry)
            self.entries[name] = entry
            return entry
        raise GrailError(
            f"no index file {name!r} for {self.db_path.name}; files of that name "
            f"beside it belong to other tables or content ({'; '.join(reasons)}): rebuild with "
            f"SELECT grail_index('edge_table', name := '{name}')")

    def _own_files(self, name: str) -> list[Path]:
        """Where index ``name`` may be persisted: beside the main database file, then beside
        each ATTACHed file database."""
        out = [files.index_path_for(self.db_path, name)] if self.db_path is not None else []
        try:
            cur = self.cursor(quiet=False)
            try:
                rows = cur.execute("SELECT path FROM duckdb_databases() "
                                   "WHERE path IS NOT NULL").fetchall()
            finally:
                cur.close()
        except (duckdb.Error, GrailError):
            rows = []
        for (path,) in rows:
            p = files.index_path_for(Path(path).resolve(), name)
            if p not in out:
                out.append(p)
        return out

    def _load_file(self, name: str, path: Path, own: bool = True) -> Entry:
        side = appends.current_source(path)
        if side.get("name", name) != name:
            raise IndexFileError(
                f"{path} holds the index {side['name']!r} of {names.readable(side['table'])}, "
                f"not {name!r} (the file was copied or renamed); rebuild {name!r} from the edge "
                f"table it indexes: SELECT grail_index('<its edge table>', name := '{name}', "
                f"rebuild := true)")
        cur = self.cursor()
        version = self.catalog_version()
        pending = hooks.writes_in_flight()
        try:
            entry = Entry(name, None, side["table"], side["src"], side["dst"], side["labels"],
                          path, {}, None, "loaded", pending=pending,
                          auto_rebuild=side.get("auto_rebuild") == "True")
            found = resolve(cur, names.table_parts(entry.table), entry.table, None)
            entry.where = found.as_tuple() if found is not None else None
            self._load_checked(cur, entry, side, version, defer=own)
            entry.signals = signals(cur, entry.where, entry.table)
        finally:
            cur.close()
        return entry

    def _load_checked(self, cur, entry: Entry, side: dict, version: int,
                      check: dict | None = None, defer: bool = True) -> None:
        """Load ``entry``'s file (its parts applied) when its table still holds what it
        records, with a tracker of this snapshot; when the table has changed since and the
        file records a row id end (and ``defer``: the database's own file), load it anyway
        with its own record: the first statement that uses it finds the change (an append
        is absorbed, anything else is stale)."""
        with appends.snapshot(cur, entry.where) as mark:
            try:
                entry.index, entry.check = load_checked(
                    cur, entry.name, entry.path, entry.table, entry.src, entry.dst, side,
                    entry.rebuild_sql(), check)
                entry.tracker = appends.baseline(cur, entry.where, entry.table, mark)
                entry.verified = version
            except StaleIndexError:
                entry.tracker = appends.tracker_of(side, entry.where) if defer else None
                if entry.tracker is None:
                    raise
                entry.index = load_index(entry.path)
                entry.check = {k: side[k] for k in ("rows", "hash", "duckdb")}
                entry.verified = None

    # --- freshness ------------------------------------------------------------------------------
    def fresh(self, entry: Entry, version: int | None = None) -> Entry:
        """``entry`` while it still describes its table (see :mod:`.staleness`); once stale, a
        :class:`StaleIndexError` until it is rebuilt, or (``auto_rebuild``) its rebuild.

        While nothing was written in the database since the last check, this costs one counter
        read, so it runs before every statement and inside every chunk of the per-chunk path.
        A check made while a write statement ran is made again once that write is done (its
        rows may have landed without moving the version).
        """
        if version is None:
            version = self.catalog_version()
        if version == entry.verified and entry.stale is None and not _landed(entry):
            return entry
        with entry.lock:
            if entry.stale is None and (version != entry.verified or _landed(entry)):
                self._verify(entry, version)
        if entry.stale is None:
            return entry
        if not entry.auto_rebuild:
            raise StaleIndexError(entry.stale)
        with self.lock:
            current = self.entries.get(entry.name)
            if current is not None and current is not entry and current.stale is None:
                return current
            return self.replace(entry)

    def _verify(self, entry: Entry, version: int) -> None:
        """What changed since the index's snapshot (:func:`.appends.verify`: an append is
        absorbed), or without one (a view), the table's catalog signals, then (when they
        match) its content check."""
        pending = hooks.writes_in_flight()  # before the table is read
        if entry.tracker is not None:
            appends.verify(self, entry, version)
            entry.pending = pending
            return
        cur = self.cursor(quiet=False)
        try:
            sig = signals(cur, entry.where, entry.table)
            changed = sig is not None and entry.signals is not None and sig != entry.signals
            if entry.where is not None and entry.where[3] == "view":
                changed = changed or bool(outside_sources(cur, entry.table))
            if not changed:
                now = table_check(cur, entry.table, entry.src, entry.dst)
                changed = not same_check(entry.check, now)
        except (duckdb.Error, GrailError):
            changed = True  # the table is gone or no longer readable as an edge table
        finally:
            cur.close()
        if changed:
            entry.stale = str(stale_error(entry.name, entry.table, entry.rebuild_sql()))
        else:
            entry.verified, entry.signals, entry.pending = version, sig, pending

    # --- build, reuse or load ---------------------------------------------------------------
    def build(self, table: str, *, src="src", dst="dst", labels=None, name=None,
              path=None, rebuild=False, auto_rebuild=None, progress=None,
              session=None) -> dict:
        """Build, reuse or load the index ``name`` of ``table``; returns its summary."""
        return self.build_entry(table, src=src, dst=dst, labels=labels, name=name, path=path,
                                rebuild=rebuild, auto_rebuild=auto_rebuild,
                                progress=progress, session=session).summary()

    def build_entry(self, table: str, *, src="src", dst="dst", labels=None,
                    name=None, path=None, rebuild=False, auto_rebuild=None,
                    progress=None, session=None) -> Entry:
        """Build, reuse or load the index ``name`` of ``table``. ``session``: the calling
        connection's (its current database and schema, search path and TEMP objects: see
        :mod:`.resolve`), so that ``table`` means what it means there. ``auto_rebuild`` None
        keeps the index's own setting (the one its file records; False for a new index)."""
        qtable = names.quote_table(table)
        qsrc, qdst = names.quote_column(src), names.quote_column(dst)
        explicit = bool(name)
        name = names.index_name(name if name else names.table_leaf(table))
        named = labels is not None
        labels = check_labels(labels if named else default_labels())
        with self.lock:
            where, qtable = self._resolve(qtable, session)
            cur = self.cursor()
            version = self.catalog_version()
            pending = hooks.writes_in_flight()
            try:
                target = Path(path).resolve() if path else self._default_path(name, where, cur)
                if target is not None:
                    files.refuse_foreign(target)
                before = self.entries.get(name)
                with appends.snapshot(cur, where) as mark:
                    check = table_check(cur, qtable, qsrc, qdst)
                    probe = Entry(name, None, qtable, qsrc, qdst, labels, target, check, where,
                                  auto_rebuild=bool(auto_rebuild), labels_named=named)
                    self._check_owner(probe, explicit, rebuild)
                    probe.tracker = appends.baseline(cur, where, qtable, mark)
                    entry = None if rebuild else self._reusable(cur, probe, version)
                    if entry is None:
                        if auto_rebuild is None and before is not None:
                            probe.auto_rebuild = before.auto_rebuild
                        entry = self._build(cur, probe, progress)
                        entry.verified = version
                if auto_rebuild is not None and entry.auto_rebuild != bool(auto_rebuild):
                    entry.auto_rebuild = bool(auto_rebuild)
                    appends.record_settings(entry)
                entry.signals = signals(cur, where, qtable)
                entry.pending = pending
            finally:
                cur.close()
            entry.index.edge_source = self.edge_source(entry)
            self.entries[name] = entry
            return entry

    def _resolve(self, qtable: str, session) -> tuple:
        """``(where, quoted name)`` of the relation ``qtable`` means on the calling connection
        (its session applied to a cursor of its own), the name as fresh cursors read it."""
        cur = self.cursor()
        try:
            default = cur.execute("SELECT current_database()").fetchall()[0][0]
            apply_session(cur, session)
            where = resolve(cur, names.table_parts(qtable), qtable, session)
        finally:
            cur.close()
        if where is None:
            return None, qtable
        return where.as_tuple(), where.quoted(default)

    def _check_owner(self, probe: Entry, explicit: bool, rebuild: bool) -> None:
        """Refuse to replace the index ``probe.name`` of another table (in memory or in its
        file) unless the name was given and ``rebuild := true`` asks for it."""
        other = self.entries.get(probe.name)
        owner = other.table if other is not None else None
        if owner is None and probe.path is not None and probe.path.exists():
            try:
                owner = files.read_source(probe.path).get("table")
            except (IndexFileError, OSError):
                owner = None
        if owner is None or owner == probe.table or (explicit and rebuild):
            return
        r, s = names.readable, names.sql_string
        parts = names.table_parts(probe.table)
        other_name = "_".join(parts) if len(parts) > 1 else f"main_{parts[0]}"
        replace = ("" if not explicit else
                   f", or replace it with grail_index({s(r(probe.table))}, name := "
                   f"{s(probe.name)}, rebuild := true)")
        raise GrailError(
            f"grail_index: the index {probe.name!r} already indexes {r(owner)}, not "
            f"{r(probe.table)}; give this one its own name, e.g. grail_index("
            f"{s(r(probe.table))}, name := {s(names.index_name_of(other_name))}){replace}")

    def edge_source(self, entry: Entry) -> EdgeSource:
        """Where the index of ``entry`` reads its original edges again (an index with cycles,
        for hops and paths): its table, through a cursor of this database, when first needed
        (the read is checked against the index's fingerprint)."""
        def read():
            cur = self.cursor()
            try:
                return read_edge_table(cur, entry.table, entry.src, entry.dst)
            finally:
                cur.close()
        return EdgeSource(read, what=f"the rows of {names.readable(entry.table)}", trusted=True)

    def _reusable(self, cur, probe: Entry, version: int) -> Entry | None:
        """A cached or persisted index of the same table, columns and labels (any, where the
        caller named none) that is still fresh (or absorbs what was appended to its table); a
        stale one is refused (rebuild := true replaces it); None when there is none."""
        entry = self.entries.get(probe.name)
        if (entry is not None and probe.same_source(entry.table, entry.src, entry.dst,
                                                    entry.labels)
                and entry.path == probe.path):
            if entry.tracker is not None and entry.stale is None:
                with contextlib.suppress(StaleIndexError):
                    entry = self.fresh(entry)
            if same_check(entry.check, probe.check) and entry.stale is None:
                if entry.action != "appended":
                    entry.action = "cached"
                return entry
            raise stale_error(probe.name, probe.table, probe.rebuild_sql())
        target = probe.path
        if target is None or not target.exists():
            return None
        side = appends.current_source(target)
        if not probe.same_source(side["table"], side["src"], side["dst"], side["labels"]):
            return None
        probe.labels = side["labels"]
        probe.auto_rebuild = side.get("auto_rebuild") == "True"
        if not same_check(side, probe.check) and appends.tracker_of(side, probe.where):
            probe.tracker = appends.tracker_of(side, probe.where)
            probe.index = load_index(target)
            probe.check = {k: side[k] for k in ("rows", "hash", "duckdb")}
            probe.action = "loaded"
            self.entries[probe.name] = probe
            probe = self.fresh(probe)  # absorbs what was appended since its file
            return probe
        probe.index, probe.check = load_checked(cur, probe.name, target, probe.table, probe.src,
                                                probe.dst, side, probe.rebuild_sql(),
                                                probe.check)
        probe.action = "loaded"
        probe.verified = version
        return probe

    def _build(self, cur, probe: Entry, progress) -> Entry:
        """Read the edge table through ``cur`` and build the index, its file (with its
        source) written as the build goes: the children during the labels, the rest after
        them (``build_index(..., save_to=writer)``). A file that cannot be written leaves the
        index in memory, with a note."""
        writer = source = None
        if probe.path is not None:
            source = probe.source(str(self._database_file(probe.where, cur) or ""))
            writer, probe.note = files.open_writer(probe.path, source)
            if writer is None:
                probe.path = None
        try:
            edges = read_edge_table(cur, probe.table, probe.src, probe.dst)
        except BaseException:
            if writer is not None:
                writer.discard()
            raise
        try:
            probe.index = build_index(edges, labels=probe.labels, progress=progress,
                                      save_to=writer)
        except IndexNotSavedError as exc:
            probe.index, probe.path = exc.index, None
            probe.note = files.kept_in_memory(source, writer.path, exc.__cause__ or exc)
        probe.action = "built"
        return probe

    def _default_path(self, name: str, where=None, cur=None) -> Path | None:
        """Where index ``name`` is persisted when no path is given: beside the file of the
        database its table lives in (None for in-memory databases)."""
        db_file = self._database_file(where, cur) if where is not None else self.db_path
        return files.index_path_for(db_file, name) if db_file is not None else None

    def _database_file(self, where, cur) -> Path | None:
        if where is None or cur is None:
            return self.db_path
        row = cur.execute("SELECT path FROM duckdb_databases() WHERE database_name = "
                          f"{names.sql_string(where[0])}").fetchall()
        return Path(row[0][0]).resolve() if row and row[0][0] else None

    def replace(self, entry: Entry, progress=None) -> Entry:
        """Rebuild ``entry`` from its table's current content (auto_rebuild, or a rebuild
        that folds appended parts in: ``progress=False`` there, it runs in the background)."""
        return self.build_entry(entry.table, src=entry.src, dst=entry.dst, labels=entry.labels,
                                name=entry.name, path=entry.path, rebuild=True,
                                auto_rebuild=entry.auto_rebuild, progress=progress)

    def release(self) -> None:
        """Drop every index (and what each keeps registered in DuckDB)."""
        with self.lock:
            for entry in self.entries.values():
                entry.cache.clear()
            self.entries.clear()
            self.plans.clear()

    @staticmethod
    def release_all() -> None:
        for reg in list(_REGISTRIES.values()):
            reg.release()


def _landed(entry: Entry) -> bool:
    """Whether a write that ran during the entry's last check is done since."""
    return bool(entry.pending) and not entry.pending <= hooks.writes_in_flight()


def new_registry(token: str, db_path) -> Registry:
    reg = Registry(token, Path(db_path).resolve() if db_path else None)
    _REGISTRIES[token] = reg
    return reg


def registry_by_token(token: str) -> Registry | None:
    """The live registry of a database token, or None."""
    return _REGISTRIES.get(token)

