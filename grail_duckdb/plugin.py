"""The DuckDB surface: ``install(con)`` registers ``grail_index``, ``reaches`` and
``reaches_pairs`` on a connection; a per-database registry keeps the named indices.

>>> import duckdb, grail_duckdb as gd
>>> con = gd.install(duckdb.connect())
>>> _ = con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
>>> con.execute("SELECT grail_index('cites').vertices").fetchall()
[(3,)]
>>> con.execute("SELECT reaches(1, 3), reaches(3, 1), reaches(NULL, 1)").fetchall()
[(True, False, None)]

Layout of the state:

* DuckDB keeps Python functions per database (every connection and cursor of one database sees
  them), so the ``__grail_*`` functions are registered once per database, with a closure over
  that database's :class:`Registry`. A token function (``__grail_db_token()``) lets a later
  ``install`` on another connection or cursor find the same registry.
* The macros of ``sql/grail.sql`` (``reaches``, ``reaches_pairs``, ``grail_index``) are TEMP
  macros, so ``install`` runs that file on every connection or cursor it is given.
* An index of a file database ``data/papers.duckdb`` named ``cites`` is written to
  ``data/papers.cites.grail.parquet`` (the engine's format, one file written atomically). Its
  metadata also records which table and columns it indexes and a cheap SQL-side check of that
  table (row count and the sum of DuckDB's ``hash`` over the rows). A new process finds it on
  the first ``reaches(..., 'cites')`` and loads it without rebuilding, after checking that the
  edge table did not change.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import sqlrewrite
from .errors import EdgeInputError, GrailError, IndexFileError, StaleIndexError

__all__ = ["install", "build", "Registry", "registry_of", "sql_text", "index_path_for"]

#: bumped when the source description stored in the index file changes meaning
SOURCE_VERSION = 1

SUMMARY_TYPE = pa.struct([
    ("name", pa.string()), ("table_name", pa.string()), ("src", pa.string()),
    ("dst", pa.string()), ("vertices", pa.int64()), ("edges", pa.int64()),
    ("components", pa.int64()), ("dag_edges", pa.int64()), ("labels", pa.int32()),
    ("backend", pa.string()), ("build_seconds", pa.float64()), ("action", pa.string()),
    ("path", pa.string()),
])
_SUMMARY_SQL = ("STRUCT(name VARCHAR, table_name VARCHAR, src VARCHAR, dst VARCHAR, "
                "vertices BIGINT, edges BIGINT, components BIGINT, dag_edges BIGINT, "
                "labels INTEGER, backend VARCHAR, build_seconds DOUBLE, action VARCHAR, "
                "path VARCHAR)")

_REGISTRIES: dict[str, "Registry"] = {}
_REGISTRIES_LOCK = threading.Lock()


# --- the SQL files -----------------------------------------------------------------------------
def sql_dir() -> Path:
    """The folder of the SQL files: ``sql/`` in a checkout, ``grail_duckdb/_sql`` in a wheel."""
    here = Path(__file__).resolve().parent
    for cand in (here / "_sql", here.parent / "sql"):
        if (cand / "grail.sql").is_file():
            return cand
    raise GrailError(f"the SQL files of grail_duckdb are missing (looked in {here / '_sql'} and "
                     f"{here.parent / 'sql'}); reinstall the package")


def sql_text(name: str) -> str:
    """The text of one of the package's SQL files (``grail.sql``, ``examples.sql``)."""
    return (sql_dir() / name).read_text()


def named_queries(name: str = "examples.sql") -> dict[str, str]:
    """The queries of a SQL file split at ``-- name: x`` lines, in file order (each query keeps
    its comment lines)."""
    out: dict[str, str] = {}
    current = None
    for line in sql_text(name).splitlines():
        if line.startswith("-- name:"):
            current = line.split(":", 1)[1].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return {k: v.strip() for k, v in out.items()}


# --- entries and the per-database registry ------------------------------------------------------
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
            entry = load_checked(cur, name, path, side["table"], side["src"], side["dst"], side)
        finally:
            cur.close()
        self.entries[name] = entry
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


def registry_of(con) -> Registry:
    """The registry of ``con``'s database (registering the functions there when it has none)."""
    try:
        token = con.execute("SELECT __grail_db_token()").fetchall()[0][0]
    except duckdb.CatalogException:
        token = None
    with _REGISTRIES_LOCK:
        reg = _REGISTRIES.get(token) if token is not None else None
        if reg is not None:
            if _closed(reg.con):
                reg.con = con
            return reg
        row = con.execute("SELECT path FROM duckdb_databases() "
                          "WHERE database_name = current_database()").fetchall()
        db_path = Path(row[0][0]).resolve() if row and row[0][0] else None
        reg = Registry(token or uuid.uuid4().hex, db_path, con)
        if token is None:
            _register_functions(con, reg.token)
        _REGISTRIES[reg.token] = reg
        return reg


def _registry(token: str) -> Registry:
    """The registry a registered function belongs to (looked up per call: a dict access)."""
    reg = _REGISTRIES.get(token)
    if reg is None:
        raise GrailError("grail_duckdb lost this database's index registry; call "
                         "grail_duckdb.install(con) again")
    return reg


def _closed(con) -> bool:
    try:
        con.execute("SELECT 1").fetchall()
        return False
    except duckdb.Error:
        return True


# --- install -------------------------------------------------------------------------------------
def install(con):
    """Register ``grail_index``, ``reaches``, ``reaches_pairs`` (and ``grail_indexes``) on
    ``con``; safe to call again, and needed once on each connection or cursor (the macros are
    per connection, the indices per database). Returns ``con``."""
    registry_of(con)
    con.execute(sql_text("grail.sql"))
    return con


def _register_functions(con, token: str) -> None:
    """The Python functions behind the macros, on ``con``'s database; each finds its registry
    by ``token`` on every call."""
    funcs = [
        ("__grail_db_token", _token_udf(token), [], "VARCHAR", "native", False),
        ("__grail_reaches_int", _reaches_udf(token), ["BIGINT", "BIGINT", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_str", _reaches_udf(token), ["VARCHAR", "VARCHAR", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        # the same without the index name: DuckDB then converts no per-row name column
        ("__grail_reaches_int_only", _reaches_only_udf(token), ["BIGINT", "BIGINT"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_str_only", _reaches_only_udf(token), ["VARCHAR", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_list_int", _reaches_list_udf(token), ["BIGINT[]", "BIGINT[]", "VARCHAR"],
         "BOOLEAN[]", "arrow", False),
        ("__grail_reaches_list_str", _reaches_list_udf(token),
         ["VARCHAR[]", "VARCHAR[]", "VARCHAR"], "BOOLEAN[]", "arrow", False),
        ("__grail_index", _index_udf(token),
         ["VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR", "BOOLEAN"],
         _SUMMARY_SQL, "arrow", True),
        ("__grail_indexes", _indexes_udf(token), [], f"{_SUMMARY_SQL}[]", "native", True),
    ]
    for name, fn, params, ret, kind, side_effects in funcs:
        try:
            con.remove_function(name)
        except (duckdb.InvalidInputException, duckdb.CatalogException):
            pass
        con.create_function(name, fn, params, ret, type=kind, null_handling="special",
                            side_effects=side_effects)


def _token_udf(token: str):
    def db_token():
        """The registry token of this database (found again by later installs)."""
        return token
    return db_token


def _one_name(names) -> str:
    """The index name of a chunk: the argument is a constant in practice; refuse mixtures."""
    if isinstance(names, pa.ChunkedArray):
        arr = names.chunk(0) if names.num_chunks == 1 else names.combine_chunks()
    else:
        arr = names
    if len(arr) == 0:
        return ""
    first = arr[0].as_py()
    if len(arr) > 1 and not _constant(arr, first):
        raise GrailError("reaches: the index name must be the same on every row (a constant)")
    return first or ""


def _constant(arr: pa.Array, first) -> bool:
    """Whether every value of ``arr`` is ``first``; a byte comparison of the string buffers
    (a few microseconds per 2048-row chunk, against ~35 for a compute kernel)."""
    if arr.null_count:
        return arr.null_count == len(arr) and first is None
    if pa.types.is_string(arr.type) and first is not None:
        raw = first.encode()
        off = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + len(arr) + 1]
        if int(off[-1] - off[0]) != len(raw) * len(arr):
            return False
        lengths_ok = bool((np.diff(off) == len(raw)).all())
        data = arr.buffers()[2]
        if not lengths_ok or data is None:
            return lengths_ok
        start, stop = int(off[0]), int(off[-1])
        return data.slice(start, stop - start).equals(pa.py_buffer(raw * len(arr)))
    return bool(pc.all(pc.equal(arr, first)).as_py())


def _reaches_udf(token: str):
    def reaches(src, dst, names):
        """Arrow scalar UDF: one chunk (<= 2048 rows) of pairs -> answers."""
        if src.null_count == len(src) or dst.null_count == len(dst):
            return pa.nulls(len(src), pa.bool_())
        return _registry(token).get(_one_name(names)).index.reaches(src, dst)
    return reaches


def _reaches_only_udf(token: str):
    def reaches_only(src, dst):
        """Arrow scalar UDF on the database's only index: one chunk of pairs -> answers."""
        if src.null_count == len(src) or dst.null_count == len(dst):
            return pa.nulls(len(src), pa.bool_())
        return _registry(token).get("").index.reaches(src, dst)
    return reaches_only


def _reaches_list_udf(token: str):
    def reaches_list(src, dst, names):
        """Arrow UDF over list rows: each row's two key lists -> one list of answers."""
        return answer_lists(_registry(token), src, dst, _one_name(names))
    return reaches_list


def answer_lists(reg: Registry, src, dst, name: str) -> pa.ListArray:
    """Answers for list rows, all rows' keys sent to the engine in one call."""
    src = src.combine_chunks() if isinstance(src, pa.ChunkedArray) else src
    dst = dst.combine_chunks() if isinstance(dst, pa.ChunkedArray) else dst
    ls = pc.list_value_length(src).fill_null(0)
    ld = pc.list_value_length(dst).fill_null(0)
    if not pc.all(pc.equal(ls, ld)).as_py() and len(src):
        raise GrailError("reaches_list: the two key lists of a row differ in length")
    valid = pc.and_(src.is_valid(), dst.is_valid())
    lengths = pc.if_else(valid, ls, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    keep = np.repeat(valid.to_numpy(zero_copy_only=False), ls.to_numpy(zero_copy_only=False))
    s_vals, d_vals = _list_values(src), _list_values(dst)
    if not keep.all():
        s_vals, d_vals = s_vals.filter(pa.array(keep)), d_vals.filter(pa.array(keep))
    if len(s_vals) == 0 or s_vals.null_count == len(s_vals) or d_vals.null_count == len(d_vals):
        answers = pa.nulls(len(s_vals), pa.bool_()) if len(s_vals) else pa.array([], pa.bool_())
    else:
        answers = reg.get(name).index.reaches(s_vals, d_vals)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    mask = pc.invert(valid)
    return pa.ListArray.from_arrays(offsets, answers, mask=mask)


def _list_values(arr: pa.ListArray) -> pa.Array:
    """The element values of a list array, respecting slicing (NULL rows contribute their
    stored elements, if any; callers drop those by the rows' lengths)."""
    offsets = arr.offsets.to_numpy(zero_copy_only=False)
    return arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _index_udf(token: str):
    def grail_index(tables, srcs, dsts, labels, names, paths, rebuilds):
        """Arrow UDF behind the grail_index macro: one summary struct per row."""
        reg = _registry(token)
        rows = []
        for i in range(len(tables)):
            table = tables[i].as_py()
            if table is None:
                raise EdgeInputError("grail_index: the table name is NULL")
            rows.append(build_with(reg, table, src=srcs[i].as_py() or "src",
                                   dst=dsts[i].as_py() or "dst",
                                   labels=5 if labels[i].as_py() is None else labels[i].as_py(),
                                   name=names[i].as_py() or None,
                                   path=paths[i].as_py() or None,
                                   rebuild=bool(rebuilds[i].as_py())))
        return pa.array(rows, SUMMARY_TYPE)
    return grail_index


def _indexes_udf(token: str):
    def grail_indexes():
        """The summaries of the indices this registry holds."""
        reg = _registry(token)
        with reg.lock:
            return [e.summary() for _, e in sorted(reg.entries.items())]
    return grail_indexes


# --- build / load with the staleness checks -------------------------------------------------------
def build(con, table: str, *, src: str = "src", dst: str = "dst", labels: int = 5,
          name: str | None = None, path=None, rebuild: bool = False, progress=None) -> dict:
    """Python twin of ``SELECT grail_index(...)``: build (or load a fresh persisted) index of
    ``table`` on ``con``'s database and return its summary dict."""
    install(con)
    return build_with(registry_of(con), table, src=src, dst=dst, labels=labels, name=name,
                      path=path, rebuild=rebuild, progress=progress)


def build_with(reg: Registry, table: str, *, src="src", dst="dst", labels=5, name=None,
               path=None, rebuild=False, progress=None) -> dict:
    """Build, reuse or load the index ``name`` of ``table`` (see :func:`build`)."""
    qtable = sqlrewrite.quote_table(table)
    qsrc, qdst = sqlrewrite.quote_column(src), sqlrewrite.quote_column(dst)
    name = sqlrewrite.index_name(name if name else sqlrewrite.table_leaf(table))
    labels = int(labels)
    with reg.lock:
        target = Path(path).resolve() if path else reg.default_path(name)
        cur = reg.cursor()
        try:
            check = table_check(cur, qtable, qsrc, qdst)
            entry = None if rebuild else _reusable(reg, cur, name, target, qtable, qsrc, qdst,
                                                    labels, check)
            if entry is None:
                entry = _build_entry(cur, name, target, qtable, qsrc, qdst, labels, check,
                                     progress)
        finally:
            cur.close()
        reg.entries[name] = entry
        return entry.summary()


def _reusable(reg, cur, name, target, qtable, qsrc, qdst, labels, check) -> Entry | None:
    """A cached or persisted index of the same table, columns and labels that is still fresh;
    a stale one is refused (rebuild := true replaces it); None when there is none."""
    same = lambda e: (e.table, e.src, e.dst, e.index.d) == (qtable, qsrc, qdst, labels)  # noqa: E731
    entry = reg.entries.get(name)
    if entry is not None and same(entry) and entry.path == target:
        if _same_check(entry.check, check):
            entry.action = "cached"
            return entry
        raise _stale(name, qtable)
    if target is None or not target.exists():
        return None
    side = read_source(target)
    if (side["table"], side["src"], side["dst"], side["labels"]) != (qtable, qsrc, qdst, labels):
        return None
    return load_checked(cur, name, target, qtable, qsrc, qdst, side, check)


def _build_entry(cur, name, target, qtable, qsrc, qdst, labels, check, progress) -> Entry:
    """Read the edge table through ``cur``, build the index, persist it with its source."""
    from .index import build_index

    edges = read_edge_table(cur, qtable, qsrc, qdst)
    index = build_index(edges, labels=labels, progress=progress)
    entry = Entry(name, index, qtable, qsrc, qdst, target, check, "built")
    if target is not None:
        index.save(target, source=source_of(entry))
    return entry


def load_checked(cur, name, path, qtable, qsrc, qdst, side, check=None) -> Entry:
    """Load a persisted index after checking that its edge table did not change.

    The cheap check (row count + hash sum, same DuckDB version) decides when it can; otherwise
    the engine's full content fingerprint of the current table is compared on load.
    """
    from .persistence import load, read_metadata

    check = check or table_check(cur, qtable, qsrc, qdst)
    meta = read_metadata(path)
    cheap_ok = (side.get("duckdb") == check["duckdb"]
                and side.get("fingerprint") == meta.get("fingerprint"))
    if cheap_ok:
        if not _same_check(side, check):
            raise _stale(name, qtable)
        index = load(path)
    else:
        fp = table_fingerprint(read_edge_table(cur, qtable, qsrc, qdst))
        try:
            index = load(path, expect_fingerprint=fp)
        except StaleIndexError:
            raise _stale(name, qtable) from None
    return Entry(name, index, qtable, qsrc, qdst, path, check, "loaded")


def _stale(name: str, qtable: str) -> StaleIndexError:
    return StaleIndexError(
        f"the reachability index {name!r} is stale: the edge table {qtable} changed since it was "
        f"built; rebuild it with SELECT grail_index('{qtable}', name := '{name}', "
        "rebuild := true) (with the same src/dst/labels arguments)")


def _same_check(a: dict, b: dict) -> bool:
    return int(a["rows"]) == int(b["rows"]) and str(a["hash"]) == str(b["hash"])


def table_check(cur, qtable: str, qsrc: str, qdst: str) -> dict:
    """Row count and the sum of DuckDB's ``hash(src, dst)`` over the edge table: one scan.

    Also the place where a missing table or column gets its error message."""
    try:
        rows, h = cur.execute(
            f"SELECT count(*), coalesce(sum(hash({qsrc}, {qdst})), 0)::VARCHAR FROM {qtable}"
        ).fetchall()[0]
    except duckdb.CatalogException as exc:
        raise EdgeInputError(
            f"grail_index: no table or view {qtable} (indices read tables through another "
            f"connection of this database, so TEMP tables and uncommitted rows are not "
            f"visible): {_first_line(exc)}") from None
    except duckdb.BinderException as exc:
        raise EdgeInputError(
            f"grail_index: {qtable} has no column {qsrc} or {qdst}; name the endpoint columns "
            f"with src := '...' and dst := '...' ({_first_line(exc)})") from None
    return {"rows": int(rows), "hash": str(h), "duckdb": duckdb.__version__}


def _first_line(exc) -> str:
    return str(exc).splitlines()[0]


def read_edge_table(cur, qtable: str, qsrc: str, qdst: str) -> pa.Table:
    """The two endpoint columns of an edge table as Arrow (columns src, dst)."""
    return cur.sql(f"SELECT {qsrc} AS src, {qdst} AS dst FROM {qtable}").to_arrow_table()


def table_fingerprint(edges: pa.Table) -> str:
    """The engine's content fingerprint of an edge table (order independent)."""
    from .backend import kernels_for
    from .ids import assign_ids
    from .index import fingerprint_of
    from .ingest import edge_columns

    cols = edge_columns(edges)
    ids, s, d = assign_ids(cols.src, cols.dst, cols.extra_vertices)
    return fingerprint_of(kernels_for("cpu"), ids, s, d)


# --- what an index file records about its edge table ----------------------------------------------
def source_of(entry: Entry) -> dict:
    """Table, columns, labels and the cheap check, stored in the index file's metadata."""
    return {"version": SOURCE_VERSION, "name": entry.name, "table": entry.table,
            "src": entry.src, "dst": entry.dst, "labels": entry.index.d, **entry.check}


def read_source(path: Path) -> dict:
    """What an index file records about its edge table; an index file without it (built
    outside SQL) or with a newer description is an :class:`IndexFileError`."""
    from .persistence import read_metadata

    meta = read_metadata(path)
    doc = {k[len("source."):]: v for k, v in meta.items() if k.startswith("source.")}
    doc["fingerprint"] = meta.get("fingerprint")
    try:
        if int(doc.get("version", 0)) > SOURCE_VERSION:
            raise IndexFileError(f"{path} was written by a newer grail_duckdb; upgrade it")
        doc["labels"] = int(doc["labels"])
        for key in ("table", "src", "dst", "rows", "hash"):
            doc[key]
        return doc
    except IndexFileError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexFileError(
            f"{path} does not say which edge table it was built from ({exc.__class__.__name__}: "
            f"{exc}); rebuild with grail_index(..., rebuild := true)") from None


def timed(fn, *args, **kw):
    """``(result, seconds)`` of one call."""
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t
