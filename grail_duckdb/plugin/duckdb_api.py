"""DuckDB's private surface, in one place: every internal of DuckDB the plugin relies on.

The plugin needs a few things DuckDB's public Python API does not offer:

* ``DuckDBPyConnection._bind``: bind a statement without running it (its columns, the Python
  variables it captures);
* ``DuckDBPyConnection._register_source``: register an Arrow table under a fresh name;
* ``DuckDBPyConnection._catalog_version``: DuckDB's count of writing statements of a database;
* ``_duckdb._collation``: the collation of a VARCHAR type;
* the connection class itself (``_duckdb.DuckDBPyConnection``), whose ``execute`` / ``sql`` /
  ... methods :mod:`.hooks` replaces;
* how DuckDB finds the Python variables a statement names (the first calling frame whose
  module is not DuckDB's own: :func:`in_duckdb_frame`);
* the text DuckDB gives an exception raised inside a Python function (:data:`UDF_ERROR`);
* the layout of ``EXPLAIN (FORMAT json)``: the tables and table functions a statement scans
  (:func:`plan`, :func:`scanned_functions`);
* the database file's header (its checkpoint count: :func:`checkpoint_iteration`) and the
  write-ahead log's entries (:func:`read_log`), which prove an append without a scan
  (:mod:`.appends`); anything they do not read as expected sends the check to a scan.

Each is tested in ``tests/test_duckdb_api.py``; :func:`check` (run by ``install``) refuses a
DuckDB that lacks one, naming the internal and the DuckDB version, so that an upgrade of
DuckDB fails here, once, with a clear message, rather than deep in a statement.
"""
from __future__ import annotations

import json
import re
import struct
import types
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..errors import GrailError

try:
    import _duckdb
except ImportError:  # pragma: no cover - every DuckDB release the plugin supports has it
    _duckdb = None

__all__ = ["SUPPORTED", "Bound", "UDF_ERROR", "bind", "catalog_version", "check", "collation",
           "checkpoint_iteration", "connection_class", "in_duckdb_frame", "plan", "read_log",
           "register_source", "replace_method", "scanned_functions"]

#: the DuckDB releases the tests ran on (``pyproject.toml`` bounds the dependency to them)
SUPPORTED = "duckdb>=2.0.1,<2.1"
#: the module name DuckDB skips when it looks for the caller's Python variables
_DUCKDB_FRAME = "duckdb.grail_duckdb_hooks"
#: DuckDB's message for an exception raised inside a Python function: the exception's class
#: name and its text follow it (group 1 and 2)
UDF_ERROR = re.compile(r"(?:while executing the UDF: |^Invalid Input Error: )(\w+): (.*)", re.S)

_CONNECTION_METHODS = ("_bind", "_register_source", "_catalog_version")


class MissingInternalError(GrailError):
    """The installed DuckDB lacks an internal the plugin relies on."""


def _missing(what: str) -> MissingInternalError:
    return MissingInternalError(
        f"grail_duckdb relies on DuckDB's internal {what}, which duckdb {duckdb.__version__} "
        f"does not have; grail_duckdb is tested on {SUPPORTED}: install it with "
        f"pip install '{SUPPORTED}'")


def connection_class() -> type:
    """DuckDB's connection class (a cursor is one too)."""
    cls = getattr(_duckdb, "DuckDBPyConnection", None) if _duckdb is not None else None
    if cls is None:
        raise _missing("module _duckdb with the class DuckDBPyConnection")
    return cls


def check() -> None:
    """Raise :class:`MissingInternalError` naming the first internal this DuckDB lacks."""
    cls = connection_class()
    for name in _CONNECTION_METHODS:
        if not callable(getattr(cls, name, None)):
            raise _missing(f"method DuckDBPyConnection.{name}")
    if not callable(getattr(_duckdb, "_collation", None)):
        raise _missing("function _duckdb._collation")


def _method(con, name: str):
    fn = getattr(con, name, None)
    if fn is None:
        raise _missing(f"method DuckDBPyConnection.{name}")
    return fn


@dataclass(frozen=True)
class Bound:
    """What DuckDB's binder says about one statement (nothing runs)."""

    names: list  # the result's column names
    types: list  # their DuckDB types
    captured: tuple  # (variable name, source handle) of the Python variables it reads


def bind(con, sql: str, *, values=None, capture: bool = False) -> Bound:
    """Bind one statement on ``con`` without running it; ``values`` types its parameters,
    ``capture`` registers the Python variables it names (DuckDB looks them up in the caller of
    the calling frame: see :func:`in_duckdb_frame`). Raises ``duckdb.Error`` when it does not
    bind."""
    out = _method(con, "_bind")(sql, capture=capture, values=values)
    return Bound(list(out[0]), list(out[1]), tuple(out[5]) if capture else ())


def register_source(con, table):
    """Register an Arrow table on ``con`` under a fresh name (the handle's ``name``); the
    source stays readable while the handle lives."""
    return _method(con, "_register_source")(table)


def catalog_version(con) -> int:
    """DuckDB's count of writing statements in ``con``'s database instance (a counter read);
    raises ``duckdb.Error`` on a closed connection."""
    return _method(con, "_catalog_version")()


def collation(typ) -> str:
    """The collation of a DuckDB VARCHAR type ('' for none or for another type)."""
    fn = getattr(_duckdb, "_collation", None) if _duckdb is not None else None
    if fn is None:
        raise _missing("function _duckdb._collation")
    try:
        return fn(typ) or ""
    except TypeError:
        return ""


def plan(con, sql: str) -> str | None:
    """DuckDB's physical plan of a query as JSON text (it names every table it scans, fully
    qualified, and every table function); None when the query does not bind."""
    try:
        rows = con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()
    except duckdb.Error:
        return None
    return json.dumps([json.loads(r[1]) for r in rows])


def scanned_functions(plan_text: str | None) -> list[str]:
    """The table functions a plan of :func:`plan` scans (upper case, e.g. 'READ_CSV')."""
    found: list = []

    def walk(node):
        if isinstance(node, dict):
            fn = (node.get("extra_info") or {}).get("Function")
            if isinstance(fn, str) and fn.upper() not in found:
                found.append(fn.upper())
            walk(node.get("children") or [])
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(json.loads(plan_text) if plan_text else [])
    return found


def replace_method(name: str, fn):
    """Set ``fn`` as the connection class's method ``name``; returns DuckDB's own method."""
    cls = connection_class()
    original = getattr(cls, name, None)
    if original is None:
        raise _missing(f"method DuckDBPyConnection.{name}")
    setattr(cls, name, fn)
    return original


def in_duckdb_frame(fn):
    """``fn`` with (a copy of) its globals named as a module of DuckDB's package, so that
    DuckDB looks up Python variables in ``fn``'s caller: DuckDB searches the first calling
    frame outside its own package, and a wrapper in any other namespace would hide the
    caller's variables. Apply it once the module of ``fn`` is complete: the copy is taken
    now."""
    frame_globals = dict(fn.__globals__)
    frame_globals["__name__"] = _DUCKDB_FRAME
    out = types.FunctionType(fn.__code__, frame_globals, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__doc__, out.__qualname__ = fn.__doc__, fn.__qualname__
    return out


bind = in_duckdb_frame(bind)  # DuckDB's capture of Python variables looks past it


# DuckDB 2.0.1's log: an entry is [uint64 size][uint64 checksum][payload of size bytes]; the
# payload starts with field 100 (0x0064, little-endian) holding the entry type as a varint
_USE_TABLE, _INSERT, _DELETE, _UPDATE, _ROW_GROUP = 25, 26, 27, 28, 29
_ALTER, _VERSION, _CHECKPOINT, _FLUSH = 20, 98, 99, 100
#: entries that change no row of an existing table (catalog creations and drops: a dropped or
#: re-created edge table has another object id)
_HARMLESS = frozenset({1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 21, 22, 23, 24})
#: the file header: DuckDB's two database headers, at these offsets, each a checksum then the
#: iteration (the count of checkpoints that wrote something)
_HEADERS = (4096, 8192)
_MAGIC = b"DUCK"


# --- the database file's checkpoint count and its write-ahead log --------------------------
def checkpoint_iteration(db_file: Path) -> int | None:
    """The number of checkpoints that wrote the database file (the larger iteration of its two
    headers), or None when the file cannot be read as DuckDB's."""
    try:
        with open(db_file, "rb") as fh:
            head = fh.read(_HEADERS[-1] + 16)
    except OSError:
        return None
    if len(head) < _HEADERS[-1] + 16 or head[8:12] != _MAGIC:
        return None
    return max(struct.unpack_from("<Q", head, at + 8)[0] for at in _HEADERS)


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at ``at``: (value, the position after it)."""
    value = shift = 0
    while True:
        if at >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def _names(payload: bytes, at: int) -> tuple[str, ...] | None:
    """The (schema, table) a USE_TABLE entry names, its payload read from ``at`` (after the
    type): field 103, an object whose field 100 is a list of strings; None if not so."""
    try:
        if payload[at:at + 4] != b"\x67\x00\x64\x00":
            return None
        count, at = _varint(payload, at + 4)
        out = []
        for _ in range(count):
            n, at = _varint(payload, at)
            out.append(payload[at:at + n].decode())
            at += n
        return tuple(out) if payload[at:at + 4] == b"\xff\xff\xff\xff" else None
    except (ValueError, UnicodeDecodeError):
        return None


def read_log(wal: Path, pos: int, table: tuple[str, str]) -> tuple[str, int]:
    """Read the log from byte ``pos`` (0: its start, or where an earlier read stopped) to the
    end of its last committed transaction: ``(what, end)``. ``what``: 'appends' when no entry
    changes a row of ``table`` otherwise than by appending (nor alters or checkpoints
    anything), else a word for the first that does; ``end``: the byte after the last
    ``WAL_FLUSH`` entry read (each commit's last: a commit's entries all lie after the
    previous commit's flush, and one whose flush is not there yet is read next time)."""
    try:
        with open(wal, "rb") as fh:
            fh.seek(pos)
            buf = fh.read()
    except FileNotFoundError:
        return ("appends" if pos == 0 else "log replaced"), 0
    except OSError:
        return "log unreadable", pos
    at = 0
    if pos == 0 and buf[:3] == b"\x64\x00\x62":  # the log's version header
        end = buf.find(b"\xff\xff", 3)
        if end < 0:
            return "appends", 0
        at = end + 2
    current = None
    what, done, seen = "appends", at, "appends"
    while at + 16 <= len(buf):
        size = struct.unpack_from("<Q", buf, at)[0]
        if at + 16 + size > len(buf):
            break  # an entry still being written
        payload = buf[at + 16:at + 16 + size]
        try:
            if payload[:2] != b"\x64\x00":
                raise ValueError("no entry type")
            kind, body = _varint(payload, 2)
        except ValueError:
            return "log not understood", pos + done
        at += 16 + size
        if kind == _FLUSH:
            what, done = seen, at  # a whole commit read
        elif kind == _USE_TABLE:
            current = _names(payload, body)
        elif kind in (_DELETE, _UPDATE):
            if seen == "appends" and (current is None or tuple(current[-2:]) == tuple(table)):
                seen = "rows deleted" if kind == _DELETE else "rows updated"
        elif kind in (_ALTER, _CHECKPOINT):
            if seen == "appends":
                seen = "table altered" if kind == _ALTER else "checkpoint"
        elif kind not in (_INSERT, _ROW_GROUP, _VERSION) and kind not in _HARMLESS:
            return "log not understood", pos + done
    return what, pos + done
