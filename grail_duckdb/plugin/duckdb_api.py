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
  (:func:`plan`, :func:`scanned_functions`).

Each is tested in ``tests/test_duckdb_api.py``; :func:`check` (run by ``install``) refuses a
DuckDB that lacks one, naming the internal and the DuckDB version, so that an upgrade of
DuckDB fails here, once, with a clear message, rather than deep in a statement.
"""
from __future__ import annotations

import json
import re
import types
from dataclasses import dataclass

import duckdb

from ..errors import GrailError

try:
    import _duckdb
except ImportError:  # pragma: no cover - every DuckDB release the plugin supports has it
    _duckdb = None

__all__ = ["SUPPORTED", "Bound", "UDF_ERROR", "bind", "catalog_version", "check", "collation",
           "connection_class", "in_duckdb_frame", "plan", "register_source", "replace_method",
           "scanned_functions"]

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
