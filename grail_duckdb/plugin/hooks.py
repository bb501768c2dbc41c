"""Plain SQL to the engine: DuckDB's ``execute`` / ``sql`` / ``query`` seen by grail_duckdb.

``install`` replaces these methods once per process on DuckDB's connection class (a cursor is
a connection too) and, when installed on DuckDB's default connection, the module functions
``duckdb.execute`` / ``duckdb.sql`` / ``duckdb.query``. The replacements act only for
connections grail_duckdb is installed on (anything else goes straight to DuckDB) and only for
statements that name ``reaches`` or a one-to-all function; for ``execute`` a router
(:mod:`.statements`) decides whether the statement can be answered with whole columns, and
returns the result of the rewritten statement, or nothing, and DuckDB runs the statement as
written (the per-chunk path). Relations (``sql``, ``query``) are always DuckDB's own: they
are evaluated when they are fetched. Errors of the project raised inside DuckDB come back as
exceptions that are both DuckDB's ``InvalidInputException`` and the project's class
(:mod:`.sqlerrors`).

The replacements run in a namespace DuckDB takes for its own
(:func:`.duckdb_api.in_duckdb_frame`):
DuckDB looks up a Python variable named in a statement (``SELECT * FROM my_arrow_table``) in
the first calling frame outside its own package, so a wrapper anywhere else would hide the
caller's variables. The replacements therefore call DuckDB themselves (binding with capture,
running the statement as written) and the router never needs the caller's frame.

``interrupt`` is wrapped too: it also sets a flag that long whole-column work polls
(:func:`interrupted`), since DuckDB's interrupt does not stop a Python call in progress.

Every connection's statements that may write (anything but a query, ``SET`` and the like;
also ``executemany`` and ``append``) are counted while they run (:func:`writes_in_flight`):
DuckDB's catalog version moves when a write statement starts, its rows become visible when it
commits, so a freshness check made in between must be made again once the write is done
(:mod:`.registry`). Every statement ``execute`` runs on an installed connection is counted
too (:func:`statements_in_flight`): a part that a statement's freshness step absorbed is
written once that statement has ended (:mod:`.appends`), not beside it.
"""
from __future__ import annotations

import itertools
import re
import threading
import time
import weakref

import duckdb

from . import duckdb_api
from .duckdb_api import in_duckdb_frame
from .sqlerrors import grail_error

__all__ = ["PLAIN", "clear_interrupt", "enable", "enable_module_functions", "in_duckdb_frame",
           "in_family", "interrupted", "keep", "nudge", "original", "release", "release_all",
           "statements_in_flight", "wait_for_statements", "watch", "writes_in_flight"]

_ORIG: dict = {}
_ORIG_MODULE: dict = {}
_LOCK = threading.Lock()
#: Arrow sources a connection's last statement reads: they must live until its result is read
_SLOTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: installed connections, and cursors made (directly or not) from one: installed on first use
_FAMILY: "weakref.WeakSet" = weakref.WeakSet()
_INTERRUPTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STATE = {"route": None, "closing": None}
#: statements that change no table: queries, settings, descriptions
_READ = re.compile(r"(?is)^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*\(*\s*"
                   r"(?:select|with|from|values|table|describe|show|summarize|explain|set|"
                   r"reset|use|pivot|unpivot)\b")
#: tokens of the write statements running now, on any connection
_WRITES: set = set()
_TOKENS = itertools.count()
#: tokens of the statements (reads too) running now through ``execute`` on installed
#: connections, and the condition their ends notify (:func:`wait_for_statements`)
_RUNNING: set = set()
_RUNNING_CHANGED = threading.Condition()


def original(name: str):
    """DuckDB's own method ``name`` of the connection class (also before any hook)."""
    return _ORIG.get(name) or getattr(duckdb_api.connection_class(), name)


def enable(route, closing) -> None:
    """Replace the class methods (once per process). ``route(con, method, query, params)``
    returns None for connections grail_duckdb is not installed on, else an object whose
    ``run(captured)`` gives the result of a rewritten statement or ``PLAIN``;
    ``closing(con)`` runs before a connection closes."""
    with _LOCK:
        _STATE["route"], _STATE["closing"] = route, closing
        if _ORIG:
            return
        for name, fn in (("execute", _execute), ("sql", _sql), ("query", _sql),
                         ("from_query", _sql), ("executemany", _executemany),
                         ("append", _append), ("cursor", _cursor), ("close", _close),
                         ("__exit__", _exit), ("interrupt", _interrupt)):
            _ORIG[name] = duckdb_api.replace_method(name, in_duckdb_frame(fn))


def enable_module_functions() -> None:
    """Also route ``duckdb.execute`` / ``duckdb.sql`` / ``duckdb.query`` (the default
    connection), once per process."""
    with _LOCK:
        if _ORIG_MODULE:
            return
        for name in ("execute", "sql", "query"):
            _ORIG_MODULE[name] = getattr(duckdb, name)
        duckdb.execute = in_duckdb_frame(_module_execute)
        duckdb.sql = duckdb.query = in_duckdb_frame(_module_sql)


class _Plain:
    """The router's answer 'run the statement as written'."""


PLAIN = _Plain()


def _rewritten(con, route, query, values):
    """The rewritten statement's result, or PLAIN where the statement runs as it is (no
    rewrite, its parameters could not be bound for capture, or the route declines)."""
    if not route.rewrite:
        return PLAIN
    try:
        captured = duckdb_api.bind(con, query, values=values,
                                   capture=True).captured if route.capture else ()
    except Exception:
        return PLAIN
    return route.run(captured)


_rewritten = in_duckdb_frame(_rewritten)  # DuckDB's capture looks past it, to the caller


def writes_in_flight() -> frozenset:
    """The write statements running now (tokens), on any connection of the process."""
    return frozenset(_WRITES)


def statements_in_flight() -> frozenset:
    """The statements running now through ``execute`` on installed connections (tokens)."""
    with _RUNNING_CHANGED:
        return frozenset(_RUNNING)


def wait_for_statements(tokens: frozenset, limit: float, hurry=lambda: False) -> None:
    """Wait until none of ``tokens`` (:func:`statements_in_flight`) runs, at most ``limit``
    seconds, or until ``hurry()`` is true (checked again after :func:`nudge`)."""
    deadline = time.monotonic() + limit
    with _RUNNING_CHANGED:
        while tokens & _RUNNING and not hurry():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            _RUNNING_CHANGED.wait(left)


def nudge() -> None:
    """Wake the waits of :func:`wait_for_statements` (their ``hurry`` changed)."""
    with _RUNNING_CHANGED:
        _RUNNING_CHANGED.notify_all()


def _running(token, start: bool) -> None:
    with _RUNNING_CHANGED:
        if start:
            _RUNNING.add(token)
        else:
            _RUNNING.discard(token)
            _RUNNING_CHANGED.notify_all()


def _begin(query):
    """The token of a statement that may write, counted until :func:`_end` (None for a
    read)."""
    if isinstance(query, str) and _READ.match(query):
        return None
    token = next(_TOKENS)
    _WRITES.add(token)
    return token


def _end(token) -> None:
    if token is not None:
        _WRITES.discard(token)


def _execute(self, query, parameters=None):
    token = _begin(query)
    running = None
    try:
        route = _STATE["route"](self, "execute", query, parameters)
        if route is None:
            return _ORIG["execute"](self, query, parameters)
        running = next(_TOKENS)
        _running(running, True)
        out = _rewritten(self, route, query, parameters)
        if out is not PLAIN:
            return out
        try:
            out = _ORIG["execute"](self, query, parameters)
        except duckdb.Error as exc:
            if grail_error(exc) is None:
                raise
            raise grail_error(exc) from None  # no local holds it: its frames go with it
        _SLOTS.pop(self, None)  # the previous statement's result is superseded
        return out
    finally:
        _end(token)
        if running is not None:
            _running(running, False)


def _sql(self, query, *, alias="", params=None):
    token = _begin(query)
    try:
        route = _STATE["route"](self, "sql", query, params)
        if route is None:
            return _ORIG["sql"](self, query, alias=alias, params=params)
        try:
            return _ORIG["sql"](self, query, alias=alias, params=params)
        except duckdb.Error as exc:
            if grail_error(exc) is None:
                raise
            raise grail_error(exc) from None
    finally:
        _end(token)


def _executemany(self, query, parameters=None):
    token = _begin(query)
    try:
        return _ORIG["executemany"](self, query, parameters)
    finally:
        _end(token)


def _append(self, table_name, df, *, by_name=False):
    token = _begin(None)
    try:
        return _ORIG["append"](self, table_name, df, by_name=by_name)
    finally:
        _end(token)


def _module_execute(query, parameters=None, *, connection=None):
    con = connection if connection is not None else duckdb.default_connection()
    if _STATE["route"](con, "execute", query, parameters) is None:
        token = _begin(query)
        try:
            return _ORIG_MODULE["execute"](query, parameters, connection=connection)
        finally:
            _end(token)
    return con.execute(query, parameters)


def _module_sql(query, *, alias="", params=None, connection=None):
    con = connection if connection is not None else duckdb.default_connection()
    if _STATE["route"](con, "sql", query, params) is None:
        token = _begin(query)
        try:
            return _ORIG_MODULE["sql"](query, alias=alias, params=params, connection=connection)
        finally:
            _end(token)
    return con.sql(query, alias=alias, params=params)


def _cursor(self):
    cur = _ORIG["cursor"](self)
    if self in _FAMILY:
        _FAMILY.add(cur)
    return cur


def _closing(con) -> None:
    closing = _STATE["closing"]
    if closing is not None:
        try:
            closing(con)
        except duckdb.Error:
            pass
    _SLOTS.pop(con, None)


def _close(self):
    _closing(self)
    return _ORIG["close"](self)


def _exit(self, exc_type=None, exc=None, traceback=None):
    """The end of a ``with`` block closes the connection: the same as ``close()``."""
    _closing(self)
    return _ORIG["__exit__"](self, exc_type, exc, traceback)


def _interrupt(self):
    _INTERRUPTED[self] = True
    return _ORIG["interrupt"](self)



def watch(con) -> None:
    """Remember an installed connection: its cursors will be installed on first use."""
    _FAMILY.add(con)


def in_family(con) -> bool:
    """Whether ``con`` is installed or a cursor (of a cursor...) of an installed one."""
    return con in _FAMILY


def keep(con, handles: list) -> None:
    """Keep the Arrow sources a statement reads alive until the connection's next statement."""
    _SLOTS[con] = handles


def release(con) -> None:
    """Forget what the previous statement of ``con`` kept (it is superseded)."""
    _SLOTS.pop(con, None)


def interrupted(con) -> bool:
    """Whether ``con.interrupt()`` was called since the statement began."""
    return bool(_INTERRUPTED.get(con))


def clear_interrupt(con) -> None:
    _INTERRUPTED.pop(con, None)


def release_all() -> None:
    """Drop every kept source (at exit)."""
    _SLOTS.clear()
