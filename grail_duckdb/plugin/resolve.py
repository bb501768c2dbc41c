"""Which relation a table name means on the calling connection.

An index reads its edge table through a cursor of its own (a query's own connection cannot run
another query), and a fresh cursor has none of the caller's session: its ``USE``, its
``search_path``, its TEMP objects. :func:`resolve` applies the caller's session (read by the SQL
macro ``__grail_session()``) to a cursor, finds the object the name means there, and returns it
fully resolved, so that every later read and check of the index (on fresh cursors) reads exactly
that object. Where the answer cannot be shown (a TEMP object of the caller, two objects that
both fit), it refuses and says how to name the table instead.

A relation whose content DuckDB cannot version is refused, with the way around it (a table of
its rows): a view whose rows depend on the caller's session variables (``getvariable``: they
are the connection's and change without any write the index can see), and a relation that
reads files or other outside data (``read_parquet``, ``read_csv``, a Python object, another
database system's tables): a rewritten file moves no catalog version, so the index could not
tell that it is stale.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from ..errors import EdgeInputError
from . import duckdb_api
from .exactness import definitions
from .names import quote_identifier, readable, sql_string

__all__ = ["Where", "apply_session", "outside_sources", "resolve"]

_VARIABLE = re.compile(r"(?i)\bgetvariable\s*\(")
#: table functions whose rows are fixed by their arguments (any other reads outside data)
_FIXED = frozenset({"RANGE", "GENERATE_SERIES", "UNNEST", "REPEAT", "REPEAT_ROW"})


@dataclass(frozen=True)
class Where:
    """A resolved relation: its database, schema, name and kind ('table' or 'view')."""

    database: str
    schema: str
    name: str
    kind: str

    def quoted(self, default_database: str) -> str:
        """Its name as a fresh cursor of the database must read it: the database's default
        catalog and schema ``main`` left out where they are implied, so that a renamed
        database file keeps its indices."""
        if self.database != default_database:
            parts = [self.database, self.schema, self.name]
        elif self.schema != "main":
            parts = [self.schema, self.name]
        else:
            parts = [self.name]
        return ".".join(quote_identifier(p) for p in parts)

    def as_tuple(self) -> tuple:
        return (self.database, self.schema, self.name, self.kind)


def apply_session(cur, session: dict | None) -> None:
    """Give ``cur`` the caller's current database, schema and search path."""
    if not session:
        return
    db, schema = session.get("database"), session.get("schema")
    if db and schema:
        cur.execute(f"USE {quote_identifier(db)}.{quote_identifier(schema)}")
    path = session.get("search_path") or ""
    if "," in path:  # more than the entry USE just set
        try:
            cur.execute(f"SET search_path = {sql_string(path)}")
        except duckdb.Error:
            pass  # a path DuckDB cannot read back: the candidates' plans decide below


def resolve(cur, parts: list[str], written: str, session: dict | None) -> Where | None:
    """The relation ``written`` (its name parts ``parts``) means for the caller whose session
    ``cur`` carries (:func:`apply_session`); None when there is none. Raises
    :class:`EdgeInputError` where the caller's name means one of its TEMP objects, two
    objects fit, or the relation is a view of the caller's session variables."""
    temporary = {t.lower() for t in (session or {}).get("temporary") or ()}
    if len(parts) == 1 and parts[0].lower() in temporary:
        raise EdgeInputError(
            f"grail_index: {written} is a TEMP table or view of this connection, which the "
            f"index cannot read (it reads through another connection of the database): make "
            f"it a table, e.g. CREATE TABLE {parts[0]}_edges AS SELECT * FROM "
            f"{readable(written)}, and index that")
    candidates = _candidates(cur, parts)
    if not candidates:
        return None
    want = _plan(cur, written)
    if want is None:
        return None
    fits = [c for c in candidates if _plan(cur, _full(c)) == want]
    if not fits:
        return None
    where = fits[0] if len(fits) == 1 or fits[0] == candidates[0] else None
    if where is None:
        names_ = ", ".join(".".join(c.as_tuple()[:3]) for c in fits)
        raise EdgeInputError(
            f"grail_index: cannot tell which of {names_} the name {readable(written)} means on "
            f"this connection; name it with its schema (and database), e.g. "
            f"grail_index('{'.'.join(fits[0].as_tuple()[1:3])}')")
    outside = outside_sources(cur, _full(where))
    if outside:
        raise EdgeInputError(
            f"grail_index: {'.'.join(where.as_tuple()[:3])} reads "
            f"{', '.join(f.lower() for f in outside)} (files or data outside the database), "
            f"whose changes DuckDB does not track, so the index could not tell when it is "
            f"stale; index a table of its rows instead, e.g. CREATE TABLE {where.name}_edges "
            f"AS SELECT * FROM {readable(written)} (and rebuild it when the files change), or "
            f"index the file itself: python -m grail_duckdb build FILE")
    if where.kind == "view" and _reads_variables(cur, where):
        raise EdgeInputError(
            f"grail_index: the view {'.'.join(where.as_tuple()[:3])} reads session variables "
            f"(getvariable), whose values are this connection's and change without a write the "
            f"index can see; index a table of its rows instead, e.g. CREATE TABLE "
            f"{where.name}_edges AS SELECT * FROM {readable(written)}")
    return where


def _full(where: Where) -> str:
    return ".".join(quote_identifier(p) for p in where.as_tuple()[:3])


def _candidates(cur, parts: list[str]) -> list[Where]:
    """The tables and views the name may mean, in the order DuckDB searches them: the
    search path's entries, then the current database's ``main``."""
    db, schema, path = cur.execute(
        "SELECT current_database(), current_schema(), current_setting('search_path')"
    ).fetchall()[0]
    if len(parts) == 3:
        order = [(parts[0], parts[1])]
    elif len(parts) == 2:
        order = [(db, parts[0]), (parts[0], "main")]
    else:
        order = [tuple(e.split(".", 1)) if "." in e else (db, e)
                 for e in (path or "").split(",") if e] + [(db, schema), (db, "main")]
    leaf = parts[-1]
    rows = cur.execute(
        "SELECT database_name, schema_name, table_name, 'table' FROM duckdb_tables() "
        f"WHERE NOT temporary AND table_name = {sql_string(leaf)} UNION ALL "
        "SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() "
        f"WHERE NOT temporary AND NOT internal AND view_name = {sql_string(leaf)}").fetchall()
    found = {(d, s): Where(d, s, t, k) for d, s, t, k in rows}
    out = []
    for key in order + sorted(found):  # any other object of that name: its plan may fit
        if key in found and found[key] not in out:
            out.append(found[key])
    return out


def outside_sources(cur, relation: str) -> list[str]:
    """The table functions reading ``relation`` scans whose rows DuckDB does not version
    (files, Python objects, other systems), from its plan; [] for tables of the database."""
    scanned = duckdb_api.scanned_functions(_plan(cur, relation))
    return sorted(f for f in scanned if f not in _FIXED)


def _plan(cur, relation: str) -> str | None:
    """DuckDB's plan of reading ``relation`` (JSON text: names every table it scans)."""
    return duckdb_api.plan(cur, f"SELECT * FROM {relation}")


def _reads_variables(cur, where: Where) -> bool:
    """Whether the view, or a view or macro it names (transitively), calls getvariable."""
    row = cur.execute(
        "SELECT sql FROM duckdb_views() WHERE database_name = "
        f"{sql_string(where.database)} AND schema_name = {sql_string(where.schema)} AND "
        f"view_name = {sql_string(where.name)}").fetchall()
    text = row[0][0] if row else ""
    return any(_VARIABLE.search(body)
               for body in definitions(cur, text or "", lambda c, sql: c.execute(sql)))
