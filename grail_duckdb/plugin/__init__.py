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
statement analysis, with sqlglot), :mod:`.registry` (the named indices of each database),
:mod:`.files` (where index files live, what they record), :mod:`.staleness` (whether an index
still describes its table), :mod:`.functions` and :mod:`.chunks` (the Python functions behind
the macros, the per-chunk path), :mod:`.traversal` (one-to-all sets), :mod:`.names`
(identifiers through sqlglot), :mod:`.sqlerrors` (errors as SQL callers see them) and
:mod:`.sqlfiles` (the SQL the plugin installs).
"""
from __future__ import annotations

import duckdb

from ..engine.index import DEFAULT_LABELS
from . import connections, hooks, statements
from .registry import Registry
from .sqlerrors import grail_error
from .sqlfiles import named_queries, sql_text
from .statements import explain, per_chunk

__all__ = ["build", "explain", "grail_error", "install", "named_queries", "per_chunk",
           "registry_of", "sql", "sql_text"]


def install(con=None):
    """Make grail_duckdb's SQL available on ``con`` and return ``con``.

    Safe to call again. The indices are per database (shared by its connections and cursors);
    cursors of an installed connection are installed on their first statement that uses
    ``reaches``. With no argument (or ``duckdb`` itself) it installs on DuckDB's default
    connection, so that ``duckdb.sql(...)`` / ``duckdb.execute(...)`` see it too.
    """
    hooks.enable(statements.route, connections.forget)
    if con is None or con is duckdb:
        hooks.enable_module_functions()
        con = duckdb.default_connection()
    connections.install_on(con)
    return con


def registry_of(con) -> Registry:
    """The registry of ``con``'s database (installing grail_duckdb on ``con`` if needed)."""
    return install(con) and connections.installed_registry(con)


def build(con, table: str, *, src: str = "src", dst: str = "dst",
          labels: int = DEFAULT_LABELS, name: str | None = None, path=None, rebuild: bool = False,
          auto_rebuild: bool | None = None, progress=None) -> dict:
    """Python twin of ``SELECT grail_index(...)``: build (or load a fresh persisted) index of
    ``table`` on ``con``'s database and return its summary dict."""
    return registry_of(con).build(table, src=src, dst=dst, labels=labels, name=name, path=path,
                                  rebuild=rebuild, auto_rebuild=auto_rebuild, progress=progress)


def sql(con, query: str, params=None, *, whole_column: bool = True):
    """Run ``query`` on ``con`` and return its DuckDB relation (``.fetchall()``, ``.arrow()``).

    The explicit form of what ``con.sql(query)`` does on an installed connection: the
    ``reaches`` calls that read one FROM source are answered with whole columns, the rest per
    chunk; ``whole_column=False`` runs every call per chunk (DuckDB's 2,048-row chunks), for
    comparison.
    """
    install(con)
    if not whole_column:
        with statements.per_chunk(con):
            return con.sql(query, params=params)
    return con.sql(query, params=params)


sql = hooks.in_duckdb_frame(sql)  # DuckDB finds the caller's Python variables (see .hooks)
