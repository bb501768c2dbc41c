"""Which connections grail_duckdb is installed on, and the Python functions each one registered.

DuckDB keeps a Python function in the database's catalog, where every connection of the
database can call it, but the only reference to the Python callable is held by the connection
that registered it: when that connection closes, the callable is freed and a later call through
another connection crashes the process (issue 11). The scheme below never crashed in any order
of ``close()`` (every order of four connections and cursors, file and in-memory databases,
``with`` blocks; ``tests/test_sql_lifetime.py``):

* each installed connection (or cursor) registers its own functions under unique names
  (``__grail_<token>_reaches_int``, ...) and its TEMP macros call only those names;
* every registered callable is a small trampoline (:class:`Udf`) kept for the life of the
  process; it holds only a weak reference to the database's registry, so nothing large is
  pinned, and a call through the name of a closed connection is still safe;
* one function per database, ``__grail_db_token()``, says which registry the database has, so
  that installs on other connections and cursors share its indices;
* at exit, the functions of connections that are still open are removed, so DuckDB prints no
  "nanobind: leaked" lines.

The registry of a database lives while any installed connection object of it does (a weak-key
mapping from connections to their installation), and is released with the last one.
"""
from __future__ import annotations

import atexit
import inspect
import threading
import uuid
import weakref
from dataclasses import dataclass, field

import duckdb

from ..errors import GrailError
from . import functions, hooks
from .registry import Registry, new_registry, registry_by_token
from .sqlfiles import sql_text

__all__ = ["Installation", "install_on", "installation", "installed_registry", "session_of"]

#: the prefix of the Python function names in ``sql/grail.sql``, replaced per connection
SQL_PREFIX = "__grail_py_"

_LOCK = threading.RLock()
_KEPT: list = []  # every callable ever registered: DuckDB's catalog points at them
_INSTALLED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_TOKEN_OWNERS: "weakref.WeakSet" = weakref.WeakSet()  # connections that registered the token


class Udf:
    """A registered Python function: calls ``body(registry, *args)`` while the registry lives.

    Kept for the life of the process (DuckDB's catalog entry cannot be removed once the
    registering connection is closed); holds nothing but a weak reference to the registry.
    """

    __slots__ = ("body", "registry", "__signature__", "__weakref__")

    def __init__(self, body, registry: Registry):
        self.body = body
        self.registry = weakref.ref(registry)
        sig = inspect.signature(body)  # DuckDB counts the parameters: the body's, but the first
        self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])

    def __call__(self, *args):
        reg = self.registry()
        if reg is None:
            raise GrailError("this database's grail_duckdb state is gone (its "
                             "connections were closed); call grail_duckdb.install(con) again")
        return self.body(reg, *args)


@dataclass(eq=False)
class Installation:
    """What ``install`` did on one connection: its registry and its functions' names."""

    registry: Registry
    prefix: str
    names: list = field(default_factory=list)


def installation(con) -> Installation | None:
    """The installation of ``con`` (None when grail_duckdb is not installed on it)."""
    try:
        return _INSTALLED.get(con)
    except TypeError:
        return None


def installed_registry(con) -> Registry | None:
    inst = installation(con)
    return None if inst is None else inst.registry


def install_on(con) -> Installation:
    """Register the functions and create the macros on ``con`` (idempotent)."""
    with _LOCK:
        inst = installation(con)
        if inst is not None:
            return inst
        execute = hooks.original("execute")
        reg = _registry_of(con, execute)
        inst = Installation(reg, f"__grail_{uuid.uuid4().hex[:12]}_")
        for name, body, params, ret, kind, side_effects in functions.FUNCTIONS:
            udf = Udf(body, reg)
            _KEPT.append(udf)
            full = inst.prefix + name
            con.create_function(full, udf, params, ret, type=kind, null_handling="special",
                                side_effects=side_effects)
            inst.names.append(full)
        execute(con, sql_text("grail.sql").replace(SQL_PREFIX, inst.prefix)).fetchall()
        _INSTALLED[con] = inst
        reg.add_owner(con)
        hooks.watch(con)
        return inst


def session_of(con) -> dict:
    """``con``'s session as ``grail_index`` passes it (``__grail_session()``, sql/grail.sql)."""
    return hooks.original("execute")(con, "SELECT __grail_session()").fetchall()[0][0]


def _registry_of(con, execute) -> Registry:
    """The registry of ``con``'s database: found by its token function, or a new one (whose
    token function is registered on ``con``)."""
    try:
        token = execute(con, "SELECT __grail_db_token()").fetchall()[0][0]
    except duckdb.CatalogException:
        token = None
    if token is not None:
        reg = registry_by_token(token)
        if reg is not None:
            return reg
    reg = new_registry(token or uuid.uuid4().hex, _database_path(con, execute))
    if token is None:
        udf = Udf(functions.db_token, reg)
        _KEPT.append(udf)
        con.create_function("__grail_db_token", udf, [], "VARCHAR", type="native",
                            null_handling="special")
        _TOKEN_OWNERS.add(con)
    return reg


def _database_path(con, execute):
    row = execute(con, "SELECT path FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchall()
    return row[0][0] if row and row[0][0] else None


def forget(con) -> None:
    """Remove ``con``'s functions (before it closes): a clean catalog, no exit messages."""
    with _LOCK:
        inst = _INSTALLED.pop(con, None)
    if inst is None:
        return
    for name in inst.names:
        try:
            con.remove_function(name)
        except duckdb.Error:
            try:
                con.abort()  # an unfinished result blocks remove_function
                con.remove_function(name)
            except duckdb.Error:
                pass


@atexit.register
def _at_exit() -> None:
    """Remove the functions of every connection still open at exit (and release the Arrow
    sources that statements and indices registered), so DuckDB prints no leak messages."""
    hooks.release_all()
    for con in list(_INSTALLED.keys()):
        forget(con)
    for con in list(_TOKEN_OWNERS):
        try:
            con.remove_function("__grail_db_token")
        except duckdb.Error:
            pass
    Registry.release_all()
