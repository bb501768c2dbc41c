"""The DuckDB surface: ``install(con)`` makes ``reaches``, ``grail_index``, ``descendants``,
``ancestors`` (and their helpers) available on a connection, and sends its plain statements
that use them to the engine with whole columns where the rows allow it.

>>> import duckdb, grail_duckdb as gd
>>> con = gd.install(duckdb.connect())
>>> _ = con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
>>> con.execute("SELECT grail_index('cites').vertices").fetchall()
[(3,)]
>>> con.execute("SELECT reaches(1, 3), reaches(3, 1), reaches(NULL, 1)").fetchall()
[(True, False, None)]
>>> con.execute("SELECT key FROM descendants(2) ORDER BY key").fetchall()
[(2,), (3,)]
>>> con.close()

One module per concern: :mod:`.connections` (registration per connection, safe in every order
of ``close``), :mod:`.hooks` (DuckDB's ``execute`` / ``sql`` seen by the plugin),
:mod:`.statements` (which path a statement takes, and running it), :mod:`.rewrite` (the
statement analysis, with sqlglot), :mod:`.exactness` (which statements the rewrite may take),
:mod:`.resolve` (which relation a name means on the calling connection), :mod:`.registry`
(the named indices of each database),
:mod:`.files` (where index files live, what they record), :mod:`.staleness` (whether an index
still describes its table), :mod:`.functions` and :mod:`.chunks` (the Python functions behind
the macros, the per-chunk path), :mod:`.traversal` (one-to-all sets), :mod:`.names`
(identifiers through sqlglot), :mod:`.sqlerrors` (errors as SQL callers see them) and
:mod:`.sqlfiles` (the SQL the plugin installs); every internal of DuckDB it relies on is
reached through :mod:`.duckdb_api`.
"""
from __future__ import annotations

import duckdb

from . import connections, duckdb_api, hooks, statements
from .registry import Registry
from .sqlerrors import grail_error
from .sqlfiles import named_queries, sql_text
from .statements import explain, per_chunk

#: DuckDB's default connection, once installed on: ``duckdb.execute(...)`` makes a new Python
#: object of it each time nothing holds one, and an installation lives with its object
_DEFAULT: list = []

__all__ = ["build", "explain", "grail_error", "install", "named_queries", "per_chunk",
           "registry_of", "sql", "sql_text"]


def install(con=None):
    """Make grail_duckdb's SQL available on a DuckDB connection.

    Registers ``reaches``, ``grail_index``, ``descendants``, ``ancestors``, ``hops``,
    ``reaches_path``, ``reaches_within``, ``grail_reach_counts`` and their helpers on the
    connection (TEMP macros: nothing is written into a database file), and routes its plain
    statements that call them to the engine with whole columns where that is exact. Safe to
    call again. The indices are per database, shared by its connections and cursors; cursors
    of an installed connection are installed on their first statement that uses the plugin.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection, optional
        The connection. None (or the ``duckdb`` module) installs on DuckDB's default
        connection, so that ``duckdb.sql(...)`` and ``duckdb.execute(...)`` see it too.

    Returns
    -------
    duckdb.DuckDBPyConnection
        ``con`` (or the default connection).

    Raises
    ------
    GrailError
        The installed DuckDB lacks an internal the plugin relies on (the message names it,
        the version installed and the versions supported).

    Examples
    --------
    >>> import duckdb, grail_duckdb as gd
    >>> con = gd.install(duckdb.connect())
    >>> _ = con.execute("CREATE TABLE e AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    >>> con.execute("SELECT grail_index('e').edges, reaches(1, 3), reaches(3, 1)").fetchall()
    [(2, True, False)]
    >>> con.close()
    """
    duckdb_api.check()
    hooks.enable(statements.route, connections.forget)
    if con is None or con is duckdb:
        hooks.enable_module_functions()
        con = duckdb.default_connection()
        _DEFAULT[:] = [con]  # DuckDB's default connection lives for the process: so does this
    connections.install_on(con)
    return con


def registry_of(con) -> Registry:
    """The registry of ``con``'s database (installing grail_duckdb on ``con`` if needed)."""
    return install(con) and connections.installed_registry(con)


def build(con, table: str, *, src: str = "src", dst: str = "dst",
          labels: int | None = None, name: str | None = None, path=None, rebuild: bool = False,
          auto_rebuild: bool | None = None, progress=None) -> dict:
    """Python twin of ``SELECT grail_index(...)``: build (or load a fresh persisted) index of
    ``table`` on ``con``'s database and return its summary dict."""
    reg = registry_of(con)
    return reg.build(table, src=src, dst=dst, labels=labels, name=name, path=path,
                     rebuild=rebuild, auto_rebuild=auto_rebuild, progress=progress,
                     session=connections.session_of(con))


def sql(con, query: str, params=None):
    """Run ``query`` on ``con`` (installing the plugin there first) and return its relation.

    The explicit form of ``con.sql(query)`` on an installed connection. A relation is
    evaluated when it is fetched, as DuckDB does (a fetch after an INSERT sees the new rows,
    and a changed edge table raises ``StaleIndexError`` then), so its ``reaches`` calls run
    per chunk; ``con.execute(query)`` runs the statement at once and takes the whole-column
    path where it is exact.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    query : str
    params : dict or sequence, optional
        The statement's parameters (``$name`` or ``$1``).

    Returns
    -------
    duckdb.DuckDBPyRelation
        Read it with ``.fetchall()``, ``.to_arrow_table()``, ``.df()``.

    Examples
    --------
    >>> import duckdb, grail_duckdb as gd
    >>> con = duckdb.connect()
    >>> _ = gd.sql(con, "CREATE TABLE e AS SELECT 1 AS src, 2 AS dst")
    >>> gd.sql(con, "SELECT grail_index('e').vertices, reaches(1, 2) AS r").fetchall()
    [(2, True)]
    >>> con.close()
    """
    install(con)
    return con.sql(query, params=params)


sql = hooks.in_duckdb_frame(sql)  # DuckDB finds the caller's Python variables (see .hooks)
