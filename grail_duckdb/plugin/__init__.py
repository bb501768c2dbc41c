"""The DuckDB surface: ``install(con)`` registers ``grail_index``, ``reaches``,
``reaches_pairs``, ``reaches_list`` and ``grail_indexes`` on a connection.

>>> import duckdb, grail_duckdb as gd
>>> con = gd.install(duckdb.connect())
>>> _ = con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
>>> con.execute("SELECT grail_index('cites').vertices").fetchall()
[(3,)]
>>> con.execute("SELECT reaches(1, 3), reaches(3, 1), reaches(NULL, 1)").fetchall()
[(True, False, None)]

One module per concern: :mod:`.registry` (the named indices of each database, where their
files live), :mod:`.functions` (the Python functions behind the macros), :mod:`.staleness`
(whether an index still describes its table), :mod:`.names` (identifiers through sqlglot),
:mod:`.rewrite` (``reaches`` calls moved to the whole-column path), :mod:`.sqlfiles` (the SQL
the plugin installs).

Layout of the state: DuckDB keeps Python functions per database (every connection and cursor
of one database sees them), so the ``__grail_*`` functions are registered once per database,
with a closure over that database's registry token; a token function (``__grail_db_token()``)
lets a later ``install`` on another connection or cursor find the same registry. The macros
of ``sql/grail.sql`` are TEMP macros, so ``install`` runs that file on every connection or
cursor it is given.
"""
from __future__ import annotations

import duckdb

from ..engine.index import DEFAULT_LABELS
from . import registry
from .functions import register_functions
from .registry import Registry
from .rewrite import columns_via
from .rewrite import rewrite as rewrite_query
from .sqlfiles import named_queries, sql_text

__all__ = ["build", "install", "named_queries", "registry_of", "sql"]


def registry_of(con) -> Registry:
    """The registry of ``con``'s database (registering the functions there when it has none)."""
    try:
        token = con.execute("SELECT __grail_db_token()").fetchall()[0][0]
    except duckdb.CatalogException:
        token = None
    reg, created = registry.find_or_create(con, token)
    if created:
        register_functions(con, reg.token)
    return reg


def install(con):
    """Register ``grail_index``, ``reaches``, ``reaches_pairs`` (and ``grail_indexes``) on
    ``con``; safe to call again, and needed once on each connection or cursor (the macros are
    per connection, the indices per database). Returns ``con``."""
    registry_of(con)
    con.execute(sql_text("grail.sql"))
    return con


def build(con, table: str, *, src: str = "src", dst: str = "dst",
          labels: int = DEFAULT_LABELS, name: str | None = None, path=None, rebuild: bool = False,
          progress=None) -> dict:
    """Python twin of ``SELECT grail_index(...)``: build (or load a fresh persisted) index of
    ``table`` on ``con``'s database and return its summary dict."""
    install(con)
    return registry_of(con).build(table, src=src, dst=dst, labels=labels, name=name,
                                  path=path, rebuild=rebuild, progress=progress)


def sql(con, query: str, params=None):
    """Run ``query`` on ``con`` with its ``reaches`` calls on the whole-column path; returns
    the DuckDB relation of the same rows as the plain query (``.fetchall()``, ``.arrow()``)."""
    install(con)
    return con.sql(rewrite_query(query, columns_via(con)), params=params)
