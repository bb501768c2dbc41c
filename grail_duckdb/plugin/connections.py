"""Which connections grail_duckdb is installed on, and the Python functions each one registered.

DuckDB keeps a Python function in the database's catalog, where every connection of the
database can call it, but the only reference to the Python callable is held by the connection
that registered it: when that connection closes, the callable is freed and a later call through
another connection crashes the process. The scheme below never crashed in any order
of ``close()`` (every order of four connections and cursors, file and in-memory databases,
``with`` blocks; ``tests/test_sql_lifetime.py``), and keeps nothing per closed connection:

* each installed connection (or cursor) registers its own functions under unique names
  (``__grail_<token>_reaches_int``, ...) and its TEMP macros call only those names;
* every registered callable is a small trampoline (:class:`Udf`) that holds only a weak
  reference to the database's registry, so nothing large is pinned;
* ``close()`` (and the end of a ``with`` block) removes the connection's functions first: then
  nothing can call them and their trampolines go with the installation. A connection dropped
  without closing hands its trampolines to its database's registry, which keeps them while
  any installed connection of the database lives (its catalog may still name them);
* one function per database, ``__grail_db_token()``, says which registry the database has, so
  that installs on other connections and cursors share its indices; it returns a plain string,
  and moves to another installed connection when the one that registered it closes. A database
  whose registry is gone (its installed connections were all closed) gets a new one on the next
  install;
* at exit, the functions of connections that are still open are removed and the connections
  closed, so DuckDB prints no "nanobind: leaked" lines.

The registry of a database lives while any installed connection object of it does (a weak-key
mapping from connections to their installation), and is released with the last one.
"""
from __future__ import annotations

import atexit
import gc
import inspect
import threading
import uuid
import weakref
from dataclasses import dataclass, field

import duckdb

from ..errors import GrailError
from . import appends, functions, hooks
from .registry import Registry, new_registry, registry_by_token
from .sqlfiles import sql_text

__all__ = ["Installation", "install_on", "installation", "installed_registry", "session_of"]

#: the prefix of the Python function names in ``sql/grail.sql``, replaced per connection
SQL_PREFIX = "__grail_py_"

#: the function that names a database's registry
TOKEN_FUNCTION = "__grail_db_token"

_LOCK = threading.RLock()
_INSTALLED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Udf:
    """A registered Python function: calls ``body(registry, *args)`` while the registry (or a
    later one of the same database) lives; holds nothing but a weak reference to it."""

    __slots__ = ("body", "registry", "token", "__signature__", "__weakref__")

    def __init__(self, body, registry: Registry):
        self.body = body
        self.registry = weakref.ref(registry)
        self.token = registry.token
        sig = inspect.signature(body)  # DuckDB counts the parameters: the body's, but the first
        self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])

    def __call__(self, *args):
        reg = self.registry() or registry_by_token(self.token)
        if reg is None:
            raise GrailError("this database's grail_duckdb state is gone (its "
                             "connections were closed); call grail_duckdb.install(con) again")
        return self.body(reg, *args)


class Token:
    """The registered ``__grail_db_token()``: the database's registry token, a plain string
    (a later registry of the database takes it over)."""

    __slots__ = ("token", "__weakref__")

    def __init__(self, token: str):
        self.token = token

    def __call__(self) -> str:
        return self.token


@dataclass(eq=False)
class Installation:
    """What ``install`` did on one connection: its registry, its functions' names and their
    callables (``token``: the token function, where this connection registered it)."""

    registry: Registry
    prefix: str
    names: list = field(default_factory=list)
    udfs: list = field(default_factory=list)
    token: Token | None = None
    finalizer: object = None


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
        reg, token = _registry_of(con, execute)
        inst = Installation(reg, f"__grail_{uuid.uuid4().hex[:12]}_", token=token)
        for name, body, params, ret, kind, side_effects in functions.FUNCTIONS:
            udf = Udf(body, reg)
            full = inst.prefix + name
            con.create_function(full, udf, params, ret, type=kind, null_handling="special",
                                side_effects=side_effects)
            inst.names.append(full)
            inst.udfs.append(udf)
        execute(con, sql_text("grail.sql").replace(SQL_PREFIX, inst.prefix)).fetchall()
        _INSTALLED[con] = inst
        inst.finalizer = weakref.finalize(con, _dropped, weakref.ref(reg), inst.udfs, token)
        reg.add_owner(con)
        hooks.watch(con)
        return inst


def session_of(con) -> dict:
    """``con``'s session as ``grail_index`` passes it (``__grail_session()``, sql/grail.sql)."""
    return hooks.original("execute")(con, "SELECT __grail_session()").fetchall()[0][0]


def _registry_of(con, execute) -> tuple[Registry, Token | None]:
    """The registry of ``con``'s database, found by its token function, or a new one (with the
    token the database names, or a new token whose function is registered on ``con``);
    returns it and the token function registered on ``con`` (None when none was)."""
    try:
        token = execute(con, f"SELECT {TOKEN_FUNCTION}()").fetchall()[0][0]
    except duckdb.CatalogException:
        token = None
    if token is not None:
        reg = registry_by_token(token)
        if reg is not None:
            return reg, None
    reg = new_registry(token or uuid.uuid4().hex, _database_path(con, execute))
    if token is not None:
        return reg, None
    fn = Token(reg.token)
    _register_token(con, fn)
    return reg, fn


def _register_token(con, fn: Token) -> None:
    con.create_function(TOKEN_FUNCTION, fn, [], "VARCHAR", type="native",
                        null_handling="special")


def _database_path(con, execute):
    row = execute(con, "SELECT path FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchall()
    return row[0][0] if row and row[0][0] else None


def forget(con) -> None:
    """Remove ``con``'s functions (before it closes): a clean catalog, nothing kept, no exit
    messages. The token function moves to another installed connection of the database."""
    inst = installation(con)
    if inst is not None:
        appends.wait_for_background(inst.registry)
    with _LOCK:
        inst = _INSTALLED.pop(con, None)
        if inst is None:
            return
        inst.finalizer.detach()
        reg = inst.registry
        if not all(_remove(con, name) for name in inst.names):
            reg.kept.extend(inst.udfs)  # still in the catalog: kept while the database lives
        if inst.token is None:
            return
        if not _remove(con, TOKEN_FUNCTION):
            reg.kept.append(inst.token)
            return
        for other in list(reg.owners):
            heir = installation(other)
            if other is con or heir is None or heir.token is not None:
                continue
            try:
                _register_token(other, inst.token)
            except duckdb.Error:
                continue
            heir.token = inst.token
            return


def _remove(con, name: str) -> bool:
    """Remove one of ``con``'s functions; whether it is gone from the catalog."""
    try:
        con.remove_function(name)
        return True
    except duckdb.Error:
        try:
            con.abort()  # an unfinished result blocks remove_function
            con.remove_function(name)
            return True
        except duckdb.Error:
            return False


def _dropped(registry_ref, udfs: list, token) -> None:
    """A connection went without ``close()``: its functions may still be in the catalog, so
    its database's registry keeps their callables (while any installed connection lives)."""
    reg = registry_ref()
    if reg is not None:
        reg.kept.extend(udfs + ([token] if token is not None else []))


@atexit.register
def _at_exit() -> None:
    """At exit, release the Arrow sources that statements and indices registered, remove the
    functions of every installed connection still open and close it (its Python functions
    go with it, the caller's own too: a connection still holding a Python function at
    interpreter shutdown makes DuckDB's bindings print "nanobind: leaked" lines), then drop
    the indices (device memory included) while the interpreter is whole."""
    hooks.release_all()
    for con in list(_INSTALLED.keys()):
        forget(con)
        try:
            hooks.original("close")(con)
        except duckdb.Error:
            pass
    Registry.release_all()
    gc.collect()
